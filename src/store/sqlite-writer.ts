/**
 * The SQLite store's write side, in a worker thread (sqlite-writer.worker.mjs): a commit there waits for its fsync
 * (synchronous=FULL) while the main thread goes on, and what is appended meanwhile goes into the next commit. One
 * batch at a time, each in one IMMEDIATE transaction.
 */
import { Worker } from 'node:worker_threads';
import { WrongExpectedVersion, type AppendResult, type ExpectedRevision } from './event-store.ts';

export interface SerializedEvent {
  id: string;
  type: string;
  data: string;
  metadata: string;
}

export interface WriteRequest {
  stream: string;
  events: SerializedEvent[];
  expected: ExpectedRevision;
}

export type WriteOutcome = { ok: true; result: AppendResult; wrote: boolean } | { ok: false; error: Error };

type Refusal =
  | { kind: 'wrong_expected_version'; stream: string; expected: ExpectedRevision; actual: bigint | 'no_stream' }
  | { kind: 'error'; message: string; code?: string };

type Reply =
  | { seq: number; outcomes: ({ ok: true; result: AppendResult; wrote: boolean } | { ok: false; refusal: Refusal })[] }
  | { seq: number; failed: string };

const errorOf = (refusal: Refusal): Error =>
  refusal.kind === 'wrong_expected_version'
    ? new WrongExpectedVersion(refusal.stream, refusal.expected, refusal.actual)
    : Object.assign(new Error(refusal.message), refusal.code ? { code: refusal.code } : {});

export class SqliteWriter {
  private readonly worker: Worker;
  private seq = 0;
  private inFlight: { seq: number; resolve(outcomes: WriteOutcome[]): void; reject(error: Error): void } | undefined;
  private gone: Error | undefined;

  /** Starts the worker on `file`, whose schema must exist already. */
  constructor(file: string, busyTimeoutMs: number) {
    this.worker = new Worker(new URL('./sqlite-writer.worker.mjs', import.meta.url), { workerData: { file, busyTimeoutMs } });
    // An idle writer does not keep the process alive; one with a commit under way does (see commit).
    this.worker.unref();
    this.worker.on('message', (reply: Reply) => {
      const pending = this.inFlight;
      if (!pending || pending.seq !== reply.seq) return;
      this.inFlight = undefined;
      this.worker.unref();
      if ('failed' in reply) pending.reject(new Error(reply.failed));
      else pending.resolve(reply.outcomes.map((o) => (o.ok ? o : { ok: false, error: errorOf(o.refusal) })));
    });
    const fail = (error: Error): void => {
      this.gone ??= error;
      this.inFlight?.reject(error);
      this.inFlight = undefined;
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`the SQLite writer thread exited (code ${code})`)));
  }

  /** Commits `batch` in one transaction: an outcome per append (refused ones roll back alone), or throws if the commit failed. */
  commit(batch: WriteRequest[]): Promise<WriteOutcome[]> {
    if (this.gone) return Promise.reject(this.gone);
    if (this.inFlight) return Promise.reject(new Error('a commit is already under way'));
    return new Promise((resolve, reject) => {
      this.inFlight = { seq: ++this.seq, resolve, reject };
      this.worker.ref();
      this.worker.postMessage({ seq: this.seq, batch });
    });
  }

  /** Stops the worker (after the caller's last commit). */
  async close(): Promise<void> {
    this.gone ??= new Error('the SQLite writer is closed');
    await this.worker.terminate();
  }
}
