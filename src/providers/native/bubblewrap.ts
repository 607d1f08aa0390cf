/**
 * Bubblewrap containment for native commands (profile `contain: true`): the argv prefix that makes the root
 * read-only, /tmp private, read-only mounts (/env/<slug>) visible, Berth's own files hidden, and the network absent
 * when the profile says `network: 'none'`; unprivileged runs are in a user namespace with every capability dropped
 * and no nested user namespace. bwrap is started by the supervisor, so `--die-with-parent` ties the sandbox to the
 * supervisor, never to the Berth runtime.
 */
import { spawnSync } from 'node:child_process';
import { lstatSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { WORKSPACE_INPUTS_NAME, WORKSPACE_TARGET, type ReadOnlyMount, type WorkspaceView } from '../provider.ts';
import { DEFAULT_PATH, findProgram } from '../command-env.ts';

export interface Containment {
  mounts?: ReadOnlyMount[];
  network?: 'none' | 'bridge';
  /** Host paths the command must not see (the Berth data dir, control sockets): replaced by empty ones. */
  hidden?: string[];
  /** Directories bound writable at another path (a build's version directory at /env/<slug>). */
  binds?: ReadOnlyMount[];
  /**
   * Keep the host as writable as without bubblewrap (an uncontained native profile that only needs its read-only
   * mounts): root entries and /tmp are bound read-write, /dev is the host's; hidden paths and mounts still apply.
   */
  hostWritable?: boolean;
  /**
   * The workspace bound writable at WORKSPACE_TARGET, its inputs read-only under it, its hidden names covered. Made
   * after every other mount, so the workspace shows even where its source lies in a hidden directory (a managed
   * workspace in the data directory), and nothing mounted later can uncover a hidden name.
   */
  workspace?: WorkspaceView;
  /** Working directory inside the sandbox (default /tmp). It is only changed to, never bound. */
  chdir?: string;
  /** Make `chdir` first (a directory of the private /tmp). */
  makeChdir?: boolean;
  /**
   * A user namespace with every capability dropped and nested user namespaces disabled: nothing inside can remount,
   * unmount or gain a capability. Every contained command and build runs so; only the uncontained profile's
   * version wrapper (the server's own privileges by design) does not.
   */
  unprivileged?: boolean;
}

/** Daemon sockets stay connectable on a read-only bind, so they are hidden outright. */
export const CONTROL_SOCKETS = ['/run/docker.sock', '/var/run/docker.sock', '/run/containerd/containerd.sock'];

/** The bwrap binary on PATH, or undefined when bubblewrap is not installed. */
export const findBubblewrap = (path = process.env.PATH || DEFAULT_PATH): string | undefined => findProgram('bwrap', path);

const exists = (path: string): boolean => {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
};

/**
 * The host root, entry by entry, read-only. Binding `/` whole would leave no writable parent in which to create
 * mount points such as /env; this way the sandbox root is bwrap's tmpfs, remounted read-only at the end. Read again
 * only when / changed (its mtime moves with every entry added or removed): a readdir per command shows in the
 * latency of every contained command.
 */
const rootCache = new Map<boolean, { mtimeMs: number; args: string[] }>();
function rootArgs(writable = false): string[] {
  const { mtimeMs } = statSync('/');
  const cached = rootCache.get(writable);
  if (cached?.mtimeMs === mtimeMs) return cached.args;
  const args: string[] = [];
  for (const entry of readdirSync('/', { withFileTypes: true })) {
    const path = `/${entry.name}`;
    if (path === '/dev' || path === '/proc' || path === '/tmp') continue;
    if (entry.isSymbolicLink()) args.push('--symlink', readlinkSync(path), path);
    else if (entry.isDirectory() || entry.isFile()) args.push(writable ? '--bind' : '--ro-bind', path, path);
  }
  rootCache.set(writable, { mtimeMs, args });
  return args;
}

const disablesUserns = new Map<string, boolean>();
/** Whether this bwrap has --disable-userns (0.8.0 and later): asked once per binary. */
function canDisableUserns(bwrap: string): boolean {
  let known = disablesUserns.get(bwrap);
  if (known === undefined) {
    known = spawnSync(bwrap, ['--help'], { encoding: 'utf8' }).stdout?.includes('--disable-userns') ?? false;
    disablesUserns.set(bwrap, known);
  }
  return known;
}

/**
 * The sandbox's pid 1, in front of the command. bwrap's own init would leave its exit (the namespace's teardown) to
 * the host's reaper, and the supervisor, which waits for the whole process group, would wait for that too: tens of
 * milliseconds per command. This shell is waited for by bwrap itself (--as-pid-1). It runs the command as its child
 * (`; exit` keeps it from exec'ing), so the command keeps the signal behaviour of any process (a namespace's pid 1
 * gets only the signals it handles); when the command ends it ends with its status, and the kernel ends whatever the
 * command left in the namespace.
 */
const PID_ONE = ['/bin/sh', '-c', '"$@"; exit $?', 'berth-init'];

/** The prefix under which a contained command's variables cross the host processes that start its sandbox. */
export const CARRIED_PREFIX = 'BERTH_CARRIED_';

/**
 * A contained command's variables as the processes that start its sandbox get them: every name under CARRIED_PREFIX.
 * Those processes run outside the sandbox, as root (the supervisor's tools, the control-group join, setpriv) or as the
 * sandbox identity in the host's namespaces (bwrap): a caller's LD_PRELOAD, LD_LIBRARY_PATH, GCONV_PATH or locale path
 * would run the caller's code there. Under another name no variable means anything to them; the sandbox's pid 1
 * gives each its name back (carryingPidOne).
 */
export function carriedEnv(env: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(env).map(([name, value]) => [`${CARRIED_PREFIX}${name}`, value]));
}

/**
 * The sandbox's pid 1 (PID_ONE) that first gives the variables `names` (valid shell names, checked by the caller)
 * their own names back. Shorter names first: a caller's own `BERTH_CARRIED_X` is carried as
 * `BERTH_CARRIED_BERTH_CARRIED_X` and is restored only after `X` took its carrier. A name not carried (a sandbox
 * started without them) stays unset. Names only, never values, are in the argv.
 */
export function carryingPidOne(names: string[]): string[] {
  if (names.length === 0) return PID_ONE;
  const ordered = [...names].sort((a, b) => a.length - b.length);
  const carrier = `${CARRIED_PREFIX}$_bsv_n`;
  const one = String.raw`[ -z \"\${${carrier}+x}\" ] || { export $_bsv_n=\"\$${carrier}\"; unset ${carrier}; }`;
  const restore = `for _bsv_n in ${ordered.join(' ')}; do eval "${one}"; done; unset _bsv_n; `;
  return ['/bin/sh', '-c', `${restore}${PID_ONE[2]}`, PID_ONE[3]];
}

/**
 * The workspace's mounts. bwrap looks a source up on the host (its old root) and a destination inside the sandbox
 * being built: a link the command planted at `.berth` or `.berth-inputs` in an earlier run is followed there, so the
 * tmpfs or the inputs land somewhere in the command's own view (or bwrap fails and nothing runs), never over or onto
 * anything of the host, and the data directory stays hidden behind its own tmpfs either way. A name that is absent
 * is made (an empty directory in the workspace), so a command can never plant one itself.
 */
function workspaceArgs(w: WorkspaceView): string[] {
  const args = ['--bind', w.source, WORKSPACE_TARGET];
  if (w.inputs !== undefined) args.push('--ro-bind', w.inputs, `${WORKSPACE_TARGET}/${WORKSPACE_INPUTS_NAME}`);
  for (const name of w.hidden) args.push('--tmpfs', `${WORKSPACE_TARGET}/${name}`);
  return args;
}

/** `bwrap <args> -- <pid 1>`: prepend to the command's argv (`pidOne`: another pid-1 program, a spare's). */
export function bubblewrapArgv(bwrap: string, c: Containment, pidOne = PID_ONE): string[] {
  const args = c.hostWritable
    ? [bwrap, ...rootArgs(true), '--dev-bind', '/dev', '/dev', '--proc', '/proc', '--bind', '/tmp', '/tmp']
    : [bwrap, ...rootArgs(), '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'];
  for (const path of [...(c.hidden ?? []), ...CONTROL_SOCKETS].filter(exists)) {
    if (statSync(path).isDirectory()) args.push('--tmpfs', path);
    else args.push('--ro-bind', '/dev/null', path);
  }
  for (const m of c.mounts ?? []) args.push('--ro-bind', m.source, m.target);
  for (const b of c.binds ?? []) args.push('--bind', b.source, b.target);
  if (c.workspace) args.push(...workspaceArgs(c.workspace));
  const chdir = c.chdir ?? '/tmp';
  if (c.makeChdir) args.push('--dir', chdir);
  args.push('--remount-ro', '/');
  // A private pid namespace: when the command ends, the kernel ends every process it left, escaped sessions included;
  // and no other process of the host (the server's, another tenant's) can be seen or signalled.
  args.push('--unshare-pid', '--die-with-parent');
  if (c.unprivileged) {
    // Every tenant's sandbox runs as the same host identity: System V IPC objects (listed in /proc/sysvipc whatever
    // the pid namespace, opened by uid alone) would be shared between tenants, and left in the host's tables.
    args.push('--unshare-user', '--unshare-ipc', '--cap-drop', 'ALL');
    if (canDisableUserns(bwrap)) args.push('--disable-userns');
  }
  if (c.network === 'none') args.push('--unshare-net');
  args.push('--as-pid-1', '--chdir', chdir, '--', ...pidOne);
  return args;
}
