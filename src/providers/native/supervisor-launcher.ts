/**
 * Starts supervisor processes through one long-lived small shell (launcher.sh) instead of forking the runtime: a
 * fork copies the runtime's page tables, which costs milliseconds of its event loop per command and grows with its
 * memory. Each program runs detached from the runtime, with exactly the environment given, and its exit status
 * comes back as the launcher's answer. The launcher has supervisor.sh's functions loaded: a supervisor runs in the
 * launcher's forked subshell, without starting a shell of its own (about 1 ms per command). And one supervisor is
 * kept made ahead of need (a spare, supervisor.sh `_bsv_spare`), its command's process already a session leader
 * waiting for its line: a command then starts with no fork, setsid or shell start on its path (about 1.5 ms).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, constants, existsSync, linkSync, mkdirSync, mkdtempSync, openSync, readdirSync, rmdirSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { SUPERVISOR_PATH } from '../spool.ts';
import { spreadSubdirectories } from '../spread-dirs.ts';
import { isLiveChildOf } from './host-process.ts';
import { containedGoLine, execLine, goLine, plain, runArgs, spareRequest, supervisorRequest, word, type SupervisedRun } from './launcher-lines.ts';

const LAUNCHER_PATH = fileURLToPath(new URL('./launcher.sh', import.meta.url));

/** How a launched program ended: its sh status (128+n for signal n), or why it cannot be known. */
export type LaunchOutcome = { code: number } | { error: Error };

export interface Launch {
  /** The program's pid once it started (undefined when the launcher went away first). */
  pid: Promise<number | undefined>;
  /** Resolves after `pid`: who ran the operation (its claim) is known by its pid when its end is. */
  exited: Promise<LaunchOutcome>;
}

export interface Pending {
  started(pid: number | undefined): void;
  exited(outcome: LaunchOutcome): void;
  /** Keeps the runtime alive while pending (a spare waiting for a request does not). */
  held: boolean;
  /** Its subshell answers its own end (launcher.sh `rSEQ`): that `x` may come before the `s`, or never (killed). */
  answersItself: boolean;
  pid?: number;
  ended?: boolean;
  /** The status of an `x` read before its `s`, told once the `s` is. */
  early?: number;
  /** Seen gone at the last look without its `x`: one more look (its answer may sit unread in the pipe) ends it. */
  missed?: boolean;
}

/**
 * Applies the launcher's answer `s PID` or `x STATUS` to its request. A self-answering subshell's `x` may be read
 * before the launcher's `s` (launcher.sh); it is told after the `s`, so `exited` never comes before `pid`.
 */
export function answer(p: Pending, event: string, n: number): void {
  if (event === 's') {
    p.pid = n;
    p.started(n);
    if (p.early !== undefined) p.exited({ code: p.early });
  } else if (event === 'x') {
    p.ended = true;
    if (p.pid === undefined) p.early = n;
    else p.exited({ code: n });
  }
}

/** A FIFO write up to this size is atomic: a spare reads a whole request or none. */
const PIPE_BUF = 4096;
/** The next spare is made when the last one's supervisor ends, or this long after it started, whichever is first. */
const SPARE_AFTER_MS = 250;
/** A spare ends itself after 30 s unused (supervisor.sh); one this old is not handed a request any more. */
const SPARE_USABLE_MS = 25_000;

const SPARE_ROOT_PREFIX = 'berth-spares-';

/** Spare directories left by processes that are gone (killed: no exit hook ran). */
function sweepSpareRoots(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(/^berth-spares-(\d+)-/.exec(name)?.[1]);
    if (pid && !existsSync(`/proc/${pid}`)) rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

/** A spare supervisor: its control directory (FIFOs), its launcher request and when it was made. */
interface Spare {
  dir: string;
  seq: number;
  launch: Launch;
  madeAt: number;
}

/**
 * A sandbox made ahead of need (supervisor.sh `_bsv_spare -o`), for the contained commands of one allocation: the
 * argv `prefix` (limits, privilege drop, bwrap with its pid-1 shell) is what every command of that allocation would
 * start with, and `outRoot` the allocation's spool directory, where the spare's output files wait to become an
 * operation's.
 */
export interface SandboxSpareKey {
  prefix: string[];
  outRoot: string;
}

/** A contained command as its sandbox's spare runs it: the command alone, its cwd inside the sandbox. */
export interface SandboxRun {
  key: SandboxSpareKey;
  command: string[];
  /**
   * The command's own variables, which only its line to the spare's pid 1 (inside the sandbox) carries; the env
   * superviseContained is given is the one the host processes before the sandbox may have (bubblewrap.ts carriedEnv).
   */
  env: Record<string, string>;
  cwd: string;
  /** The cwd is a directory of the private /tmp that may not exist yet. */
  makeDir: boolean;
}

/** Contained spares are kept for this many allocations at most (the ones that ran a contained command last). */
const MAX_SANDBOX_SPARES = 4;
/** The request that ends a spare unused. */
const SPARE_EXIT = 'exit 0\n';
/** How long a spare still starting is asked to end before it is sent TERM. */
const SPARE_END_MS = 5_000;
/** Names no operation id can take ([A-Za-z0-9_.-]), so a spare's output directory never meets an operation's. */
const SANDBOX_OUT_PREFIX = 'spare+';
/** How often the runtime looks for self-answering subshells that ended without answering (killed by a signal). */
const LOST_LOOK_MS = 250;

class Launcher {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private seq = 0;
  private gone?: Error;
  private spareRoot?: string;
  private spare?: Spare;
  private spareDue = false;
  private lostLook?: NodeJS.Timeout;
  /** Contained spares by key (JSON of SandboxSpareKey), each with its output directory once made; most recently used last. */
  private readonly sandboxSpares = new Map<string, { key: SandboxSpareKey; spare?: Spare & { out: string } }>();

  constructor(onGone: () => void) {
    // Its own session: a terminal's signals to the runtime's process group never reach what it starts.
    this.child = spawn('/bin/sh', [LAUNCHER_PATH, SUPERVISOR_PATH], { detached: true, stdio: ['pipe', 'pipe', 'ignore'], env: {}, cwd: '/' });
    const end = (error: Error): void => {
      if (this.gone) return;
      this.gone = error;
      onGone();
      if (this.spareRoot) void rm(this.spareRoot, { recursive: true, force: true });
      // Whether those programs still run is for their claims and receipts to say, not for this process.
      for (const p of this.pending.values()) {
        p.started(undefined);
        p.exited({ error });
      }
      this.pending.clear();
      clearInterval(this.lostLook);
    };
    this.child.once('error', (e) => end(e));
    this.child.once('exit', (code, signal) => end(new Error(`the launcher exited (${signal ?? code})`)));
    this.child.stdin!.on('error', (e) => end(e));
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      const [event, seq, n] = line.split(' ');
      const p = this.pending.get(Number(seq));
      if (!p) return;
      answer(p, event, Number(n));
      if (event === 's' && p.answersItself) this.lookForLost();
      if (p.ended && p.pid !== undefined) this.settle(Number(seq));
    });
    // An idle launcher does not keep the runtime alive (it ends at EOF when the runtime does); a pending answer does.
    this.child.unref();
    this.pipes().stdin.unref?.();
    this.holdWhilePending();
  }

  private pipes() {
    type Refable = { ref?: () => void; unref?: () => void };
    return { stdin: this.child.stdin as unknown as Refable, stdout: this.child.stdout as unknown as Refable };
  }

  private holdWhilePending(): void {
    const { stdout } = this.pipes();
    if ([...this.pending.values()].some((p) => p.held)) stdout.ref?.();
    else stdout.unref?.();
  }

  launch(command: string | Error, held = true, answersItself = false): Launch {
    return this.start(command, held, answersItself).launch;
  }

  /** `supervisor.sh ARGS`: in the launcher's subshell, which answers its own end, or by exec (supervisorRequest). */
  superviseArgs(args: string[], env: Record<string, string>): Launch {
    const { line, answersItself } = supervisorRequest(args, env);
    return this.launch(line, true, answersItself);
  }

  private settle(seq: number): void {
    this.pending.delete(seq);
    this.holdWhilePending();
  }

  /**
   * Ends each self-answering launch whose subshell is gone without its answer, as a lost launcher's are ended; the
   * look stops once none is left to look at.
   */
  private lookForLost(): void {
    this.lostLook ??= setInterval(() => {
      let left = false;
      for (const [seq, p] of this.pending) {
        if (!p.answersItself || p.ended || p.pid === undefined) continue;
        if (isLiveChildOf(p.pid, this.child.pid!)) p.missed = false;
        else if (!p.missed) p.missed = true;
        else {
          p.exited({ error: new Error('it ended without answering (killed by a signal)') });
          this.settle(seq);
          continue;
        }
        left = true;
      }
      if (left) return;
      clearInterval(this.lostLook);
      this.lostLook = undefined;
    }, LOST_LOOK_MS).unref();
  }

  private start(command: string | Error, held: boolean, answersItself = false): { seq: number; launch: Launch } {
    if (this.gone || command instanceof Error) {
      return { seq: 0, launch: { pid: Promise.resolve(undefined), exited: Promise.resolve({ error: this.gone ?? (command as Error) }) } };
    }
    const seq = ++this.seq;
    let started!: (pid: number | undefined) => void;
    let exited!: (outcome: LaunchOutcome) => void;
    const launch: Launch = {
      pid: new Promise((resolve) => (started = resolve)),
      exited: new Promise((resolve) => (exited = resolve)),
    };
    this.pending.set(seq, { started, exited, held, answersItself });
    this.holdWhilePending();
    this.child.stdin!.write(`${answersItself ? 'r' : ''}${seq} ${command}\n`);
    return { seq, launch };
  }

  /** A supervised run: handed to the spare when one is waiting, else launched as any supervisor is. */
  supervise(run: SupervisedRun, env: Record<string, string>): Launch {
    const args = runArgs(run);
    const launch = (plain(Object.keys(env)) && this.handToSpare(args, goLine(run, env))) || this.superviseArgs(args, env);
    this.spareAfter(launch);
    return launch;
  }

  /** The spare's launch once it has the request (one atomic FIFO write); undefined when none is waiting. */
  private handToSpare(args: string[], go: string): Launch | undefined {
    const spare = this.spare;
    if (!spare || !request(spare, spareRequest(args, go))) return undefined;
    this.spare = undefined;
    return this.used(spare);
  }

  private used(spare: Spare): Launch {
    const pending = this.pending.get(spare.seq);
    if (pending) pending.held = true;
    this.holdWhilePending();
    return spare.launch;
  }

  /**
   * A contained run: handed to the sandbox's spare when one waits (its output files then become the operation's,
   * in `run.dir`, which the caller made), else launched as any run is (`run.argv` being the
   * whole sandbox argv). Either way the sandbox's next spare is made after it.
   */
  superviseContained(run: SupervisedRun, env: Record<string, string>, sandbox: SandboxRun): Launch {
    const id = JSON.stringify(sandbox.key);
    const spare = this.sandboxSpares.get(id)?.spare;
    let launch: Launch | undefined;
    // Only a spare that waits (`ready`: its sandbox holds its output files) is taken.
    if (spare && !run.stdin && plain(Object.keys(sandbox.env)) && existsSync(join(spare.dir, 'ready'))) {
      this.sandboxSpares.delete(id);
      // The request's argv stays the whole sandbox argv: the supervisor starts it itself if the spare's is gone.
      const line = spareRequest(runArgs(run), containedGoLine({ ...run, cwd: sandbox.cwd, argv: sandbox.command }, sandbox.env, sandbox.makeDir));
      const fits = Buffer.byteLength(line) <= PIPE_BUF && Date.now() - spare.madeAt <= SPARE_USABLE_MS;
      if (fits && adopt(spare.out, run.dir) && request(spare, line)) launch = this.used(spare);
      else request(spare, SPARE_EXIT);
    }
    launch ??= this.supervise(run, env);
    this.sandboxSpareAfter(launch, id, sandbox.key);
    return launch;
  }

  /** Makes the key's next spare sandbox once `launch` ended or after SPARE_AFTER_MS, keeping the most recent keys. */
  private sandboxSpareAfter(launch: Launch, id: string, key: SandboxSpareKey): void {
    if (this.sandboxSpares.has(id) || this.gone) return;
    const due = { key };
    this.sandboxSpares.set(id, due);
    for (const [oldest, { spare }] of this.sandboxSpares) {
      if (this.sandboxSpares.size <= MAX_SANDBOX_SPARES) break;
      this.sandboxSpares.delete(oldest);
      if (spare) void endSpare(spare);
    }
    const make = () => {
      clearTimeout(timer);
      if (this.sandboxSpares.get(id) === due) this.makeSandboxSpare(id, key);
    };
    const timer = setTimeout(make, SPARE_AFTER_MS);
    timer.unref();
    void launch.exited.then(make);
  }

  private makeSandboxSpare(id: string, key: SandboxSpareKey): void {
    const dir = this.spareDir();
    if (!dir) return void this.sandboxSpares.delete(id);
    const entry = { key, spare: undefined as (Spare & { out: string }) | undefined };
    const out = join(key.outRoot, `${SANDBOX_OUT_PREFIX}${process.pid}-${this.seq + 1}`);
    const { seq, launch } = this.start(`_bsv_spare ${[dir, '-o', out, '--', ...key.prefix].map(word).join(' ')}`, false, true);
    const spare = { dir, seq, launch, madeAt: Date.now(), out };
    entry.spare = spare;
    this.sandboxSpares.set(id, entry);
    void launch.exited.then(() => {
      if (this.sandboxSpares.get(id) === entry) this.sandboxSpares.delete(id);
      void rm(dir, { recursive: true, force: true });
    });
  }

  /**
   * Ends the spare sandboxes of the allocation whose spool directory is `outRoot`, made or due; resolves once each
   * made one has ended (its sandbox killed, its output directory removed: the allocation's group and spool are free).
   */
  dropSandboxSpares(outRoot: string): Promise<unknown> {
    const ended: Promise<unknown>[] = [];
    for (const [id, { key, spare }] of this.sandboxSpares) {
      if (key.outRoot !== outRoot) continue;
      this.sandboxSpares.delete(id);
      if (spare) ended.push(endSpare(spare));
    }
    return Promise.all(ended);
  }

  /** Makes the next spare once `launch` ended or after SPARE_AFTER_MS: not while a short command runs. */
  private spareAfter(launch: Launch): void {
    if (this.spare || this.spareDue || this.gone) return;
    this.spareDue = true;
    const timer = setTimeout(() => this.makeSpare(), SPARE_AFTER_MS);
    timer.unref();
    void launch.exited.then(() => {
      clearTimeout(timer);
      this.makeSpare();
    });
  }

  /** Resolves once no spare is due and the one made (if any) waits for its request. */
  async sparesSettled(): Promise<void> {
    const waiting = (spare: Spare | undefined) => spare && !existsSync(join(spare.dir, 'ready'));
    const sandboxWaiting = () => [...this.sandboxSpares.values()].some(({ spare }) => !spare || waiting(spare));
    for (let i = 0; i < 1000 && (this.spareDue || waiting(this.spare) || sandboxWaiting()); i++) {
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  private makeSpare(): void {
    if (!this.spareDue) return;
    this.spareDue = false;
    if (this.spare || this.gone) return;
    const dir = this.spareDir();
    if (!dir) return;
    const { seq, launch } = this.start(`_bsv_spare ${word(dir)}`, false, true);
    const spare = { dir, seq, launch, madeAt: Date.now() };
    this.spare = spare;
    void launch.exited.then(() => {
      if (this.spare === spare) this.spare = undefined;
      void rm(dir, { recursive: true, force: true });
    });
  }

  /** A new spare's control directory; undefined when none can be made (commands then start the ordinary way). */
  private spareDir(): string | undefined {
    if (this.gone) return undefined;
    try {
      if (!this.spareRoot) {
        sweepSpareRoots();
        const root = (this.spareRoot = mkdtempSync(join(tmpdir(), `${SPARE_ROOT_PREFIX}${process.pid}-`)));
        spreadSubdirectories(root); // a directory per spare, made and removed at the pace of commands
        // Its spares end with this process: each still waiting is told so (a contained one's sandbox and output
        // directory go with it), then their directories go. A spare that had not reached its FIFO yet finds it gone
        // and ends as well.
        process.once('exit', () => {
          endWaitingSpares(root);
          rmSync(root, { recursive: true, force: true, maxRetries: 2 });
        });
      }
      const dir = join(this.spareRoot, String(this.seq + 1));
      mkdirSync(dir);
      return dir;
    } catch {
      return undefined;
    }
  }
}

/**
 * Writes `line` to the spare's request FIFO in one write; false when it is not (or no longer) waiting there, or (for
 * work, not an `exit 0`) too old to be handed any.
 */
function request(spare: Spare, line: string): boolean {
  const ending = line === SPARE_EXIT;
  if (Buffer.byteLength(line) > PIPE_BUF || (!ending && Date.now() - spare.madeAt > SPARE_USABLE_MS)) return false;
  let fd: number;
  try {
    // Non-blocking: ENXIO when the spare is not (or no longer) waiting on its FIFO.
    fd = openSync(join(spare.dir, 'req'), constants.O_WRONLY | constants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    writeSync(fd, line);
    return true;
  } catch {
    return false; // it went away between the open and the write: it ran nothing
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes an exit request into every spare's FIFO under `root`, whether or not the spare reads it yet (opened
 * read-write, a FIFO never blocks): at process exit, nothing can wait for them.
 */
function endWaitingSpares(root: string): void {
  for (const name of readdirSync(root)) {
    try {
      const fd = openSync(join(root, name, 'req'), constants.O_RDWR | constants.O_NONBLOCK);
      try {
        writeSync(fd, SPARE_EXIT);
      } finally {
        closeSync(fd);
      }
    } catch {
      // no FIFO there (yet, or any more)
    }
  }
}

/**
 * Tells a spare to end, and resolves once it has: a spare still starting reads no request yet, so the request is
 * tried again until it is read (or, after SPARE_END_MS, the supervisor is sent TERM, on which it ends the same way).
 */
async function endSpare(spare: Spare): Promise<void> {
  let exited = false;
  void spare.launch.exited.then(() => (exited = true));
  for (const deadline = Date.now() + SPARE_END_MS; !exited && !request(spare, SPARE_EXIT); ) {
    if (Date.now() > deadline) {
      const pid = await spare.launch.pid;
      try {
        if (pid) process.kill(pid, 'SIGTERM');
      } catch {
        // gone meanwhile
      }
      break;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  await spare.launch.exited;
}

/**
 * Makes the spare's output files the operation's (`opDir`, made by the caller): each is linked in under its name,
 * never over a file already there (a racing supervisor's), and its spare name dropped, so the operation's file has
 * one name as the spool requires. False when any step fails: the spare then ends and removes its directory.
 */
function adopt(out: string, opDir: string): boolean {
  try {
    for (const name of ['stdout', 'stderr']) {
      linkSync(join(out, name), join(opDir, name));
      unlinkSync(join(out, name));
    }
    rmdirSync(out);
    return true;
  } catch {
    return false;
  }
}

let shared: Launcher | undefined;

/** The launcher is one per process, started on first use and again after it went away. */
function launcher(): Launcher {
  const current = (shared ??= new Launcher(() => {
    if (shared === current) shared = undefined;
  }));
  return current;
}

/** Runs `argv` (argv[0] an absolute path) detached, with exactly `env`, cwd `/` and stdio on /dev/null. */
export function launchDetached(argv: string[], env: Record<string, string>): Launch {
  return launcher().launch(execLine(argv, env));
}

/** Runs `supervisor.sh ARGS` (cancel, or a run) detached, as launchDetached does, with exactly `env`. */
export function superviseDetached(args: string[], env: Record<string, string>): Launch {
  return launcher().superviseArgs(args, env);
}

/** Runs a command under `supervisor.sh run`, detached, with exactly `env` (through the spare when one waits). */
export function superviseRun(run: SupervisedRun, env: Record<string, string>): Launch {
  return launcher().supervise(run, env);
}

/** A contained run, through the key's spare sandbox when one waits (Launcher.superviseContained). */
export function superviseContained(run: SupervisedRun, env: Record<string, string>, sandbox: SandboxRun): Launch {
  return launcher().superviseContained(run, env, sandbox);
}

/** Ends the spare sandboxes made for the allocation whose spool directory is `outRoot`; resolves once they ended. */
export function dropSandboxSpares(outRoot: string): Promise<unknown> {
  return shared ? shared.dropSandboxSpares(outRoot) : Promise.resolve();
}

/**
 * Resolves once the spare supervisor is made and waiting (or none is due). Benchmarks wait for it, so making the
 * next spare does not land in a baseline's sample.
 */
export function sparesSettled(): Promise<void> {
  return shared ? shared.sparesSettled() : Promise.resolve();
}
