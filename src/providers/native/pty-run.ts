/**
 * A native PTY execution, owned by the runtime itself (no sh supervisor: job control and Ctrl-C need the command
 * to lead its own session on the terminal). It follows the spool protocol so readers use the same cursor API:
 * claim `pty <pid> <starttime>`, `started`, every byte read from the terminal appended to `pty`, and a receipt.
 * It does not survive a runtime crash: the terminal closes, the claim names a dead process, and readers see no
 * receipt (an unknown outcome). While the runtime lives, output is complete without any attached client. When the
 * command exits, whatever is left of its session is hung up (SIGHUP, then SIGKILL), as when a terminal closes.
 */
import { closeSync, constants, openSync, writeSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import pty from 'node-pty';
import type { Spool } from '../spool.ts';
import { processStartTime, stopSession } from './host-process.ts';
import { DEFAULT_TERM } from '../command-env.ts';

export interface PtyRunOptions {
  spool: Spool;
  operationId: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
  timeoutMs?: number;
  graceMs: number;
  /** Called after every byte written to the spool and when the receipt lands. */
  onChange: () => void;
}

export class PtyRun {
  /** Resolves once the receipt is written. */
  readonly done: Promise<void>;
  private readonly term?: pty.IPty;
  private stopping?: Promise<void>;

  private constructor(
    private readonly o: PtyRunOptions,
    start: { term: pty.IPty; output: number; slave: number } | { error: string },
  ) {
    if ('error' in start) {
      this.done = this.finish(null, start.error);
      return;
    }
    this.term = start.term;
    this.done = this.follow(start.term, start.output, start.slave);
  }

  /** Claims and starts the run; undefined when another claimant owns the operation. */
  static async start(o: PtyRunOptions): Promise<PtyRun | undefined> {
    const me = await processStartTime(process.pid);
    if (!(await o.spool.claim(o.operationId, `pty ${process.pid} ${me}`))) return undefined;
    const cwdOk = await stat(o.cwd).then((s) => s.isDirectory(), () => false);
    if (!cwdOk) return new PtyRun(o, { error: 'cwd' });
    const output = await o.spool.openAppend(o.operationId, 'pty');
    let term: pty.IPty;
    try {
      term = pty.spawn(o.argv[0], o.argv.slice(1), {
        name: o.env.TERM ?? DEFAULT_TERM,
        cols: o.cols,
        rows: o.rows,
        cwd: o.cwd,
        env: o.env,
        encoding: null,
      });
    } catch {
      closeSync(output);
      return new PtyRun(o, { error: 'spawn' });
    }
    // Attached before any await: node-pty emits data as soon as it reads, and nothing may be lost.
    term.onData((data) => {
      writeSync(output, data as unknown as Buffer);
      o.onChange();
    });
    // Linux can report the terminal closed (EIO) before the last bytes the command wrote reach the reader. Holding a
    // slave descriptor keeps it open; node-pty then drains for 200 ms after the exit before it reports it.
    const slave = openSync((term as unknown as { ptsName: string }).ptsName, constants.O_RDWR | constants.O_NOCTTY);
    const started = { supervisor: process.pid, pid: term.pid, pgid: term.pid };
    await o.spool.writeNew(o.operationId, 'started', `${JSON.stringify(started)}\n`);
    return new PtyRun(o, { term, output, slave });
  }

  write(bytes: Buffer): void {
    this.term?.write(bytes);
  }

  /** A terminal has no separate end of input: EOF is the VEOF character (Ctrl-D) at the start of a line. */
  end(): void {
    this.term?.write('\x04');
  }

  resize(cols: number, rows: number): void {
    this.term?.resize(cols, rows);
  }

  /** Stops the whole session (TERM, then KILL after the grace period); the caller waits for `done`. */
  stop(): Promise<void> {
    if (!this.term) return Promise.resolve();
    this.stopping ??= stopSession(this.term.pid, this.o.graceMs);
    return this.stopping;
  }

  private async follow(term: pty.IPty, output: number, slave: number): Promise<void> {
    const { spool, operationId, timeoutMs } = this.o;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            void spool.marker(operationId, 'timedout').then(() => this.stop());
          }, timeoutMs);
    const exit = await new Promise<{ exitCode: number; signal?: number }>((resolve) => term.onExit(resolve));
    clearTimeout(timer);
    closeSync(slave);
    // What is left of the session is hung up, as when a terminal closes.
    await stopSession(term.pid, this.o.graceMs, 'SIGHUP');
    await this.stopping;
    closeSync(output);
    await this.finish(exit.signal ? 128 + exit.signal : exit.exitCode);
  }

  private async finish(status: number | null, error?: string): Promise<void> {
    const { spool, operationId } = this.o;
    const cancelled = await spool.hasMarker(operationId, 'cancel');
    const timedOut = await spool.hasMarker(operationId, 'timedout');
    await spool.writeReceipt(operationId, { status, cancelled, timedOut, ...(error ? { error } : {}) });
    this.o.onChange();
  }
}
