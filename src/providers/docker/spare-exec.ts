/**
 * A Docker exec started ahead of need, so a submit does not wait for the engine to start one: creating and starting
 * an exec costs the engine tens of ms (runc enters the container), most of a short command's whole run. The spare
 * is `/bin/sh -s` as the command's user, waiting on its attached stdin; a submit hands it one script, which runs
 * the supervisor in that very shell (sourced), and closes stdin. From then on the exec's process IS the supervisor,
 * so the exec's liveness is the supervisor's, exactly as for an exec started on demand. An unused spare ends when
 * its stdin closes (the runtime stops or dies); the engine forgets it with its container.
 */
import type { Socket } from 'node:net';
import type Docker from 'dockerode';
import { shellExportable } from '../command-env.ts';
import { createExec, startAttached } from './docker-exec.ts';

const quote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/**
 * The script that turns a spare shell into `sh FILE ARGS...` with `env` added to its environment: it exports the
 * variables and sources FILE with ARGS as the positional parameters, so the spare's own process runs it (as the
 * process of `sh FILE` would), and ends the shell after it. One brace group: a shell runs none of it unless all of
 * it arrived, so a runtime killed in the middle of the write starts nothing. Undefined when a name cannot be
 * exported as given (not a shell name, or one a shell keeps for itself): that needs the exec's own Env.
 */
export function spareScript(file: string, args: string[], env: Record<string, string>): string | undefined {
  const names = Object.keys(env);
  if (!names.every(shellExportable)) return undefined;
  const exports = names.map((n) => `export ${n}=${quote(env[n])}; `).join('');
  return `{ ${exports}set -- ${args.map(quote).join(' ')}; . ${quote(file)}; exit; }\n`;
}

/** One started `sh -s`, waiting for its script. */
export interface Spare {
  readonly exec: Docker.Exec;
  /** Gives the shell its script and closes its stdin; the spare is used up. */
  run(script: string): void;
}

interface Held extends Spare {
  /** Its stream ended: the shell is gone (container stopped, stdin closed). */
  gone: boolean;
  discard(): void;
}

/** How long a submit waits for a spare that is still starting before it starts an exec of its own. */
const TAKE_WAIT_MS = 5_000;

/** Keeps at most one spare exec ready in a container. */
export class SpareExec {
  private next?: Promise<Held | undefined>;
  /** A fill asked for later (fillAfter), and how to run it now. */
  private later?: { timer: NodeJS.Timeout; done: Promise<void>; fire: () => void };
  private closed = false;

  constructor(
    private readonly o: {
      /** Control calls (with an idle timeout): the exec is created and inspected through it. */
      docker: Docker;
      /** Attached streams (no idle timeout): a spare may wait long. */
      streams: Docker;
      containerId: string;
      user: string;
    },
  ) {}

  /** Starts a spare unless one is ready or starting. */
  fill(): void {
    this.later?.fire();
    if (this.closed || this.next) return;
    const next = this.start();
    this.next = next;
    // One that failed to start is forgotten; the next fill tries again.
    void next.then((spare) => {
      if (!spare && this.next === next) this.next = undefined;
    });
  }

  /** Starts a spare in `ms` unless fill() comes first. */
  fillAfter(ms: number): void {
    if (this.closed || this.next || this.later) return;
    let fire!: () => void;
    const done = new Promise<void>((resolve) => {
      fire = () => {
        clearTimeout(this.later?.timer);
        this.later = undefined;
        resolve();
        this.fill();
      };
    });
    const timer = setTimeout(() => fire(), ms);
    timer.unref();
    this.later = { timer, done, fire };
  }

  /**
   * The ready (or starting) spare, taken out; undefined when there is none, or when one still starting does not
   * answer within TAKE_WAIT_MS (an engine that hangs), so the caller starts its own exec, with its own deadlines.
   */
  async take(): Promise<Spare | undefined> {
    const next = this.next;
    this.next = undefined;
    if (!next) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const spare = await Promise.race([next, new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), TAKE_WAIT_MS)))]);
    clearTimeout(timer);
    if (spare && !spare.gone) return spare;
    void next.then((late) => late?.discard());
    return undefined;
  }

  /** A spare taken but not used (its submit lost the race for the operation) is kept for the next one. */
  giveBack(spare: Spare): void {
    const held = spare as Held;
    if (this.closed || this.next || held.gone) held.discard();
    else this.next = Promise.resolve(held);
  }

  /**
   * Resolves once no spare is starting: its shell runs (the engine answers a start before it enters the container).
   * Benchmarks keep that engine work out of what they time next; only they ask, so only they pay the looks.
   */
  async settled(): Promise<void> {
    await this.later?.done;
    const spare = await this.next;
    for (let i = 0; spare && !spare.gone && i < 1_000; i++) {
      // The engine marks an exec running before runc enters the container; it has a pid once its process runs.
      const info = await spare.exec.inspect().catch(() => undefined);
      if (!info?.Running || info.Pid) return;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Ends the waiting shell, if any; no spare is started after. */
  async close(): Promise<void> {
    this.closed = true;
    this.later?.fire();
    const next = this.next;
    this.next = undefined;
    (await next)?.discard();
  }

  private async start(): Promise<Held | undefined> {
    try {
      const { docker, streams, containerId, user } = this.o;
      const exec = await createExec(docker.getContainer(containerId), { cmd: ['/bin/sh', '-s'], user }, { stdin: true });
      const stream = await startAttached(streams.getExec(exec.id), false);
      // An idle spare must not keep the runtime's process alive.
      (stream as Socket).unref?.();
      const held: Held = {
        exec,
        gone: false,
        run: (script) => {
          held.gone = true;
          stream.end(script);
        },
        discard: () => {
          held.gone = true;
          stream.end();
        },
      };
      const gone = () => (held.gone = true);
      stream.on('end', gone).on('close', gone).on('error', gone).resume();
      if (this.closed) held.discard();
      return held;
    } catch {
      // The container is gone or the engine refused: submits start their own exec, which reports the real error.
      return undefined;
    }
  }
}
