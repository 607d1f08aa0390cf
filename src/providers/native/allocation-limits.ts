/**
 * Resource limits of contained native commands, with a Docker container's semantics: one control group per native
 * allocation (or build) holds the profile's memory (no swap on top), CPU and pids limits, and every contained
 * command of it joins that group before it drops privilege. cgroup v1 and v2 are detected once per process (root
 * only); without a writable hierarchy, each command gets per-process rlimits instead (see README "Resource limits").
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Profile } from '../../../schemas/profile.ts';
import { findProgram } from '../command-env.ts';
import { isSpoolName } from '../spool.ts';

/** The profile's limits that bound a command (Docker's `Memory` + `MemorySwap`, `NanoCpus`, `PidsLimit`). */
export type CommandLimits = Pick<Profile, 'memoryMb' | 'cpus' | 'pidsLimit'>;

/** How limits are enforced on this host: one group per allocation, per-process rlimits, or not at all. */
export type LimitMode = 'cgroup-v1' | 'cgroup-v2' | 'rlimit' | 'none';

const CONTROLLERS = ['memory', 'pids', 'cpu'] as const;
type Controller = (typeof CONTROLLERS)[number];

/** Where each usable controller's hierarchy is mounted (v1: one mount per controller; v2: one for all). */
export interface Hierarchy {
  version: 1 | 2;
  mounts: Partial<Record<Controller, string>>;
}

const CFS_PERIOD_US = 100_000;

/** The limits a profile sets; undefined when it sets none. */
export function limitsOf(profile: Profile): CommandLimits | undefined {
  const { memoryMb, cpus, pidsLimit } = profile;
  if (memoryMb === undefined && cpus === undefined && pidsLimit === undefined) return undefined;
  return { memoryMb, cpus, pidsLimit };
}

/** The cgroup hierarchies from /proc/self/mountinfo: v1 mounts of our controllers, else a v2 mount that has them. */
export function findHierarchy(mountinfo: string): Hierarchy | undefined {
  const v1: Partial<Record<Controller, string>> = {};
  let v2: string | undefined;
  for (const line of mountinfo.split('\n')) {
    const [before, after] = line.split(' - ');
    if (!after) continue;
    const mountPoint = before.split(' ')[4];
    const [fstype, , superOptions = ''] = after.split(' ');
    if (fstype === 'cgroup') {
      const options = superOptions.split(',');
      for (const c of CONTROLLERS) if (options.includes(c)) v1[c] ??= mountPoint;
    } else if (fstype === 'cgroup2') {
      v2 ??= mountPoint;
    }
  }
  if (Object.keys(v1).length > 0) return { version: 1, mounts: v1 };
  if (!v2) return undefined;
  // A hybrid host's v2 mount (/sys/fs/cgroup/unified) has no controllers: nothing to limit there.
  const available = readText(join(v2, 'cgroup.controllers')).split(/\s+/);
  const mounts: Partial<Record<Controller, string>> = {};
  for (const c of CONTROLLERS) if (available.includes(c)) mounts[c] = v2;
  return Object.keys(mounts).length > 0 ? { version: 2, mounts } : undefined;
}

let detected: { hierarchy: Hierarchy | undefined } | undefined;
/** This host's hierarchy, detected once per process; none unless Berth runs as root (groups are root's to make). */
function hostHierarchy(): Hierarchy | undefined {
  detected ??= { hierarchy: process.getuid?.() === 0 ? findHierarchy(readText('/proc/self/mountinfo')) : undefined };
  return detected.hierarchy;
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

/** Joins each group (the files before `--`) and execs the rest: the shell's pid is the command's from then on. */
const JOIN_SCRIPT =
  'while [ "$1" != -- ]; do echo $$ > "$1" || { echo "berth: cannot join the control group of this allocation" >&2; exit 125; }; shift; done; shift; exec "$@"';

/**
 * The limits of one Berth data directory: its groups live at `<hierarchy>/berth/<hash of the data dir>/<name>`
 * (a name is an allocation id or `build-…`), so runtimes on other data directories (tests) never collide.
 */
export class AllocationLimits {
  readonly mode: LimitMode;
  /** Controllers asked for that this host cannot apply (v1 without a pids mount, v2 not delegating cpu). */
  readonly missing: Controller[] = [];
  private readonly parents: Partial<Record<Controller, string>> = {};
  private readonly prlimit: string | undefined;

  /** `hierarchy`: this host's (detected), or `'none'` for the fallback. */
  constructor(dataDir: string, hierarchy: Hierarchy | 'none' = hostHierarchy() ?? 'none') {
    const key = createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16);
    if (hierarchy !== 'none') {
      for (const c of CONTROLLERS) {
        const mount = hierarchy.mounts[c];
        const parent = mount && delegatedParent(mount, key, c, hierarchy.version);
        if (parent) this.parents[c] = parent;
        else this.missing.push(c);
      }
    }
    const usable = Object.keys(this.parents).length > 0;
    this.mode = usable && hierarchy !== 'none' ? (hierarchy.version === 1 ? 'cgroup-v1' : 'cgroup-v2') : findProgram('prlimit') ? 'rlimit' : 'none';
    this.prlimit = this.mode === 'rlimit' ? findProgram('prlimit') : undefined;
  }

  /** The group directories of `name`, one per distinct hierarchy (v2: one). */
  groupDirs(name: string): string[] {
    if (!isSpoolName(name)) throw new Error(`not a group name: ${name}`);
    return [...new Set(Object.values(this.parents).map((parent) => join(parent, name)))];
  }

  /** Creates `name`'s group (or finds it again) and writes its limits. Idempotent; a no-op without cgroups. */
  ensure(name: string, limits: CommandLimits): void {
    const dirs = this.groupDirs(name);
    if (dirs.length > 0) this.makeParents();
    for (const dir of dirs) mkdirSync(dir, { recursive: true });
    const at = (c: Controller, file: string, value: string) => {
      const parent = this.parents[c];
      if (parent) writeFileSync(join(parent, name, file), value);
    };
    if (limits.pidsLimit !== undefined) at('pids', 'pids.max', String(limits.pidsLimit));
    if (limits.memoryMb !== undefined) {
      const bytes = String(limits.memoryMb * 1024 * 1024);
      if (this.mode === 'cgroup-v1') {
        // memsw (memory + swap) may never be below the memory limit: lift it, set the memory, then hold swap at 0.
        const memsw = this.parents.memory && join(this.parents.memory, name, 'memory.memsw.limit_in_bytes');
        const swapAccounted = memsw !== undefined && readText(memsw) !== '';
        if (swapAccounted) writeFileSync(memsw, '-1');
        at('memory', 'memory.limit_in_bytes', bytes);
        if (swapAccounted) writeFileSync(memsw, bytes);
      } else {
        at('memory', 'memory.max', bytes);
        const swap = this.parents.memory && join(this.parents.memory, name, 'memory.swap.max');
        if (swap && readText(swap) !== '') writeFileSync(swap, '0');
      }
    }
    if (limits.cpus !== undefined) {
      const quota = String(Math.max(1000, Math.round(limits.cpus * CFS_PERIOD_US)));
      if (this.mode === 'cgroup-v1') {
        at('cpu', 'cpu.cfs_period_us', String(CFS_PERIOD_US));
        at('cpu', 'cpu.cfs_quota_us', quota);
      } else {
        at('cpu', 'cpu.max', `${quota} ${CFS_PERIOD_US}`);
      }
    }
  }

  /**
   * The argv prefix that puts a command under `name`'s limits before it drops privilege: it joins the group (a
   * pure function of the name, so it can be prepared ahead), or sets rlimits in the fallback.
   */
  prefix(name: string, limits: CommandLimits): string[] {
    if (this.mode === 'cgroup-v1' || this.mode === 'cgroup-v2') {
      const procs = this.groupDirs(name).map((dir) => join(dir, 'cgroup.procs'));
      return ['/bin/sh', '-c', JOIN_SCRIPT, 'berth-limits', ...procs, '--'];
    }
    if (this.mode === 'none') return [];
    const args: string[] = [];
    if (limits.pidsLimit !== undefined) args.push(`--nproc=${limits.pidsLimit}`);
    if (limits.memoryMb !== undefined) args.push(`--data=${limits.memoryMb * 1024 * 1024}`);
    return args.length > 0 ? [this.prlimit!, ...args, '--'] : [];
  }

  /** Removes `name`'s group once it is empty (a command still ending gets about a second). Never throws. */
  async remove(name: string): Promise<void> {
    if (!isSpoolName(name)) return;
    for (const dir of this.groupDirs(name)) {
      for (let attempt = 0; attempt < 20; attempt++) {
        const code = rmdirCode(dir);
        if (code !== 'EBUSY') break;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }

  /** Removes this data directory's empty groups left by an earlier run (non-empty ones still hold commands). */
  sweep(): void {
    for (const parent of new Set(Object.values(this.parents))) {
      let names: string[] = [];
      try {
        names = readdirSync(parent, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
      } catch {
        continue;
      }
      for (const name of names) rmdirCode(join(parent, name));
    }
  }

  /** `berth/<key>` in each hierarchy, made on first use (v2: with the controllers delegated to its children). */
  private makeParents(): void {
    for (const c of CONTROLLERS) {
      const parent = this.parents[c];
      if (!parent) continue;
      mkdirSync(parent, { recursive: true });
      if (this.mode === 'cgroup-v2') delegate(parent, c);
    }
  }

  /** Lets go of this data directory's parent group when nothing is left in it. */
  close(): void {
    for (const parent of new Set(Object.values(this.parents))) rmdirCode(parent);
  }
}

function rmdirCode(dir: string): string | undefined {
  try {
    rmdirSync(dir);
    return undefined;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code;
  }
}

/**
 * `<mount>/berth/<key>` (made on first use), once `<mount>/berth` is made with the controller delegated down to it
 * (v2: `+c` in each level's subtree_control); undefined when this host does not let Berth (a read-only cgroupfs, a
 * v2 group that holds processes and so cannot delegate).
 */
function delegatedParent(mount: string, key: string, controller: Controller, version: 1 | 2): string | undefined {
  try {
    mkdirSync(join(mount, 'berth'), { recursive: true });
    if (version === 2) for (const dir of [mount, join(mount, 'berth')]) delegate(dir, controller);
    return join(mount, 'berth', key);
  } catch {
    return undefined;
  }
}

/** v2: lets `dir`'s children have `controller` (a no-op when they already do). */
function delegate(dir: string, controller: Controller): void {
  const file = join(dir, 'cgroup.subtree_control');
  if (!readText(file).split(/\s+/).includes(controller)) writeFileSync(file, `+${controller}`);
}
