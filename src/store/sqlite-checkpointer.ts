/**
 * Copies the SQLite store's write-ahead log into the database file from a worker thread (its own connection), so the
 * main thread's commits do not also carry the checkpoints: with SQLite's automatic ones, every thousandth page
 * appended made one commit copy the log's pages and sync the database file (about a tenth of the main thread's time
 * under 100 concurrent actors). Commits themselves stay on the main thread, synchronous=FULL, as they were. Where
 * commits come faster than the worker copies (one appender after another), the log would never be copied whole and
 * SQLite would never start it over: the main connection then finishes the copy between two of its commits.
 */
import { Worker } from 'node:worker_threads';

/** Commits after which the main thread checkpoints itself while the worker has not answered (gone or stuck). */
const FALLBACK_COMMITS = 2000;
/** A log the worker reports this long (frames: pages) is checkpointed by the next commit itself (SQLite's own default). */
const MAX_LOG_FRAMES = 1000;

export class SqliteCheckpointer {
  private worker: Worker | undefined;
  /** A checkpoint asked for and not answered yet. */
  private asked = false;
  private commitsSinceCheckpoint = 0;
  /** The worker reported a log of MAX_LOG_FRAMES or more: the next commit checkpoints here. */
  private catchUpHere = false;
  private closed = false;

  constructor(
    private readonly file: string,
    /** Runs a checkpoint on the main connection (the fallback). */
    private readonly checkpointHere: () => void,
    private readonly intervalMs = 50,
  ) {}

  /** A commit wrote to the log: a checkpoint follows soon (one at a time, at most one per interval). */
  committed(): void {
    if (this.closed) return;
    this.commitsSinceCheckpoint++;
    if (this.catchUpHere || this.commitsSinceCheckpoint >= FALLBACK_COMMITS) {
      this.catchUpHere = false;
      this.checkpointHere();
      this.commitsSinceCheckpoint = 0;
    }
    if (this.asked) return;
    this.asked = true;
    this.start().postMessage('checkpoint');
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.worker?.terminate();
  }

  /** Started by the first commit: a store opened only to read never starts one. */
  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./sqlite-checkpointer.worker.mjs', import.meta.url), {
      workerData: { file: this.file, intervalMs: this.intervalMs },
    });
    worker.unref(); // a checkpoint never keeps the process alive: the log is checkpointed on the next open anyway
    worker.on('message', (reply: { frames?: number; copied?: number; error?: string }) => {
      this.asked = false;
      if (reply.error === undefined) this.commitsSinceCheckpoint = 0;
      // SQLite starts the log over only at a commit that finds all of it copied, which a writer committing while the
      // worker copies never does: the log grew without end (200 MiB in 4 s of appends one after another), each commit
      // extending the file, whose sync then also writes its inode (half the appends per second). Between two of its
      // own commits the main connection copies the rest (the worker did most), and the next commit starts it over.
      if ((reply.frames ?? 0) >= MAX_LOG_FRAMES) this.catchUpHere = true;
    });
    // A worker that fails leaves the fallback to the main thread; asking it again would wait for nothing.
    worker.on('error', () => undefined);
    worker.on('exit', () => {
      this.asked = true;
    });
    this.worker = worker;
    return worker;
  }
}
