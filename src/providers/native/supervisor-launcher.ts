/**
 * Starts supervisor processes through one long-lived small shell (launcher.sh) instead of forking the runtime: a
 * fork copies the runtime's page tables, which costs milliseconds of its event loop per command and grows with its
 * memory. Each program runs detached from the runtime, with exactly the environment given, and its exit status
 * comes back as the launcher's answer. The launcher has supervisor.sh's functions loaded: a supervisor runs in the
 * launcher's forked subshell, without starting a shell of its own (about 1 ms per command).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { shellExportable } from '../command-env.ts';
import { SUPERVISOR_PATH } from '../spool.ts';

const LAUNCHER_PATH = fileURLToPath(new URL('./launcher.sh', import.meta.url));
const ENV_PATHS = ['/usr/bin/env', '/bin/env'];

/** How a launched program ended: its sh status (128+n for signal n), or why it cannot be known. */
export type LaunchOutcome = { code: number } | { error: Error };

export interface Launch {
  /** The program's pid once it started (undefined when the launcher went away first). */
  pid: Promise<number | undefined>;
  exited: Promise<LaunchOutcome>;
}

interface Pending {
  started(pid: number | undefined): void;
  exited(outcome: LaunchOutcome): void;
}

/** One single-quoted sh word; a newline becomes the launcher's `$_l_nl`, so a request stays on one line. */
const word = (s: string): string => `'${s.replace(/'/g, `'\\''`).replace(/\n/g, `'"$_l_nl"'`)}'`;

/** The launcher's own shell variables (words of a request expand `$_l_nl`): never exported in its subshell. */
const OWN_NAMES = /^_l_/;
const plain = (names: string[]): boolean => names.every((k) => shellExportable(k) && !OWN_NAMES.test(k));

/**
 * The sh line that replaces the launcher's subshell with `argv` and exactly `env`. The subshell's only other
 * exported variable is PWD (any sh exports it; a started sh sets its own anyway). Plain names are exported by the
 * subshell itself; any other name needs `env -i` (one more exec), which takes every name as it is.
 */
function execLine(argv: string[], env: Record<string, string>): string | Error {
  const names = Object.keys(env);
  if (plain(names)) return [...exportsOf(env), 'exec', ...argv.map(word)].join(' ');
  envPath ??= ENV_PATHS.find((p) => existsSync(p)) ?? null;
  if (!envPath) return new Error('env(1) is not installed');
  return ['exec', envPath, '-i', ...names.map((k) => word(`${k}=${env[k]}`)), ...argv.map(word)].join(' ');
}

const exportsOf = (env: Record<string, string>): string[] => Object.keys(env).map((k) => `export ${k}=${word(env[k])};`);

/** The sh line that runs `supervisor.sh ARGS` in the launcher's subshell itself, or by exec when `env` needs `env -i`. */
function supervisorLine(args: string[], env: Record<string, string>): string | Error {
  if (!plain(Object.keys(env))) return execLine(['/bin/sh', SUPERVISOR_PATH, ...args], env);
  return [...exportsOf(env), '_bsv_main', ...args.map(word)].join(' ');
}

class Launcher {
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, Pending>();
  private seq = 0;
  private gone?: Error;

  constructor(onGone: () => void) {
    // Its own session: a terminal's signals to the runtime's process group never reach what it starts.
    this.child = spawn('/bin/sh', [LAUNCHER_PATH, SUPERVISOR_PATH], { detached: true, stdio: ['pipe', 'pipe', 'ignore'], env: {}, cwd: '/' });
    const end = (error: Error): void => {
      if (this.gone) return;
      this.gone = error;
      onGone();
      // Whether those programs still run is for their claims and receipts to say, not for this process.
      for (const p of this.pending.values()) {
        p.started(undefined);
        p.exited({ error });
      }
      this.pending.clear();
    };
    this.child.once('error', (e) => end(e));
    this.child.once('exit', (code, signal) => end(new Error(`the launcher exited (${signal ?? code})`)));
    this.child.stdin!.on('error', (e) => end(e));
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      const [event, seq, n] = line.split(' ');
      const p = this.pending.get(Number(seq));
      if (event === 's') p?.started(Number(n));
      if (event !== 'x') return;
      p?.exited({ code: Number(n) });
      this.pending.delete(Number(seq));
      this.holdWhilePending();
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
    if (this.pending.size > 0) stdout.ref?.();
    else stdout.unref?.();
  }

  launch(command: string | Error): Launch {
    if (this.gone || command instanceof Error) {
      return { pid: Promise.resolve(undefined), exited: Promise.resolve({ error: this.gone ?? (command as Error) }) };
    }
    const seq = ++this.seq;
    let started!: Pending['started'];
    let exited!: Pending['exited'];
    const launch: Launch = {
      pid: new Promise((resolve) => (started = resolve)),
      exited: new Promise((resolve) => (exited = resolve)),
    };
    this.pending.set(seq, { started, exited });
    this.holdWhilePending();
    this.child.stdin!.write(`${seq} ${command}\n`);
    return launch;
  }
}

let shared: Launcher | undefined;
let envPath: string | null | undefined;

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

/** Runs `supervisor.sh ARGS` (run or cancel) detached, as launchDetached does, with exactly `env`. */
export function superviseDetached(args: string[], env: Record<string, string>): Launch {
  return launcher().launch(supervisorLine(args, env));
}
