/**
 * One output stream of a remote operation read ahead over the host's byte stream (POST /v1/exec/stream, read as
 * byte-stream.ts does): the bytes arrive as they are written, with no request per read, and reads at the tail's offset
 * are answered from what it holds, copied into one reused ring as they arrive. At most HIGH_WATER bytes are held:
 * past that the connection is paused and the host waits (and drops the stream after its stall window; the reader then
 * reads on from its offset). A body that ends cleanly means the stream is closed; one that breaks, or stays silent
 * too long, makes the tail unusable and the reader falls back to plain reads.
 */
import type { OutputChunk } from '../provider.ts';
import { ByteRing } from './byte-ring.ts';
import type { ByteSink, ByteSource } from './byte-stream.ts';

const HIGH_WATER = 8 << 20;
/** How long a tail may hold nothing new before a read stops trusting it (a cut link sends no error). */
const SILENT_MS = 5_000;
/** A tail no read asked for this long is closed (its reader went away or moved to another offset). */
const IDLE_MS = 10_000;
const EMPTY = Buffer.alloc(0);

export class OutputTail {
  /** The offset of the first byte held: the cursor a read must name to be answered here. */
  private position: number;
  private readonly held = new ByteRing(HIGH_WATER);
  private ended = false;
  private broken = false;
  private heardAt = Date.now();
  private source?: ByteSource;
  /** Whether the source was told to stop (the tail holds HIGH_WATER bytes). */
  private paused = false;
  private readonly waiters = new Set<() => void>();
  private readonly idle: NodeJS.Timeout;

  constructor(
    cursor: number,
    open: (sink: ByteSink) => Promise<ByteSource>,
    private readonly onClose: () => void,
  ) {
    this.position = cursor;
    this.idle = setTimeout(() => this.close(), IDLE_MS).unref();
    const sink: ByteSink = {
      data: (view) => {
        this.held.push(view);
        this.heardAt = Date.now();
        this.wake();
        this.paused = this.held.length >= HIGH_WATER;
        return !this.paused;
      },
      end: () => ((this.ended = true), this.wake()),
      broken: () => this.fail(),
    };
    open(sink).then(
      (source) => {
        if (this.broken) return source.destroy();
        this.source = source;
        this.heardAt = Date.now();
        this.flow();
      },
      () => this.fail(),
    );
  }

  /** Whether a read at `cursor` can be answered here. */
  serves(cursor: number): boolean {
    if (this.broken || cursor !== this.position) return false;
    return this.held.length > 0 || this.ended || Date.now() - this.heardAt < SILENT_MS;
  }

  /** Whether the tail is dead (broken, or silent past trust): the reader closes it and reads plainly. */
  get dead(): boolean {
    return this.broken || (this.held.length === 0 && !this.ended && Date.now() - this.heardAt >= SILENT_MS);
  }

  /** The held bytes from the tail's offset (call only when `serves`), at most `max`, into `into` when given. */
  take(max: number, into?: Buffer): OutputChunk {
    this.idle.refresh();
    const want = Math.min(max, this.held.length, into?.length ?? max);
    if (want === 0) return { data: EMPTY, next: this.position, closed: this.ended };
    const data = into ? into.subarray(0, want) : Buffer.allocUnsafe(want);
    this.held.shift(data, want);
    this.position += want;
    this.flow();
    return { data, next: this.position, closed: this.ended && this.held.length === 0 };
  }

  /** Resolves when bytes arrive, the body ends or breaks, or after `timeoutMs`. */
  changed(timeoutMs: number): Promise<void> {
    if (this.held.length > 0 || this.ended || this.broken) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      this.waiters.add(done);
    });
  }

  close(): void {
    this.fail();
    this.source?.destroy();
  }

  /** Resumes a paused source once a reader took half of what it held. */
  private flow(): void {
    if (!this.paused || !this.source || this.held.length >= HIGH_WATER / 2) return;
    this.paused = false;
    this.source.resume();
  }

  private fail(): void {
    if (this.broken) return;
    this.broken = true;
    clearTimeout(this.idle);
    this.onClose();
    this.wake();
  }

  private wake(): void {
    for (const waiter of [...this.waiters]) waiter();
  }
}
