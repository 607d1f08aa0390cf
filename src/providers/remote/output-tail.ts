/**
 * One output stream of a remote operation read ahead over the host's byte stream (POST /v1/exec/stream): the bytes
 * arrive as they are written, with no request per read, and reads at the tail's offset are answered from what it
 * holds. At most HIGH_WATER bytes are held: past that the body is paused and the host waits (and drops the stream
 * after its stall window; the reader then reads on from its offset). A body that ends cleanly means the stream is
 * closed; one that breaks, or stays silent too long, makes the tail unusable and the reader falls back to plain reads.
 */
import type http from 'node:http';
import type { OutputChunk } from '../provider.ts';

const HIGH_WATER = 8 << 20;
/** How long a tail may hold nothing new before a read stops trusting it (a cut link sends no error). */
const SILENT_MS = 5_000;
/** A tail no read asked for this long is closed (its reader went away or moved to another offset). */
const IDLE_MS = 10_000;
const EMPTY = Buffer.alloc(0);

export class OutputTail {
  /** The offset of the first byte held: the cursor a read must name to be answered here. */
  private position: number;
  private readonly held: Buffer[] = [];
  private bytes = 0;
  private ended = false;
  private broken = false;
  private heardAt = Date.now();
  private res?: http.IncomingMessage;
  private readonly waiters = new Set<() => void>();
  private readonly idle: NodeJS.Timeout;

  constructor(
    cursor: number,
    response: Promise<http.IncomingMessage>,
    private readonly onClose: () => void,
  ) {
    this.position = cursor;
    this.idle = setTimeout(() => this.close(), IDLE_MS).unref();
    response.then(
      (res) => {
        if (this.broken) return void res.destroy();
        this.res = res;
        this.heardAt = Date.now();
        res.on('data', (chunk: Buffer) => {
          this.held.push(chunk);
          this.bytes += chunk.length;
          this.heardAt = Date.now();
          if (this.bytes >= HIGH_WATER) res.pause();
          this.wake();
        });
        res.on('end', () => ((this.ended = true), this.wake()));
        res.on('close', () => {
          if (!res.complete) this.fail();
        });
        res.on('error', () => this.fail());
      },
      () => this.fail(),
    );
  }

  /** Whether a read at `cursor` can be answered here. */
  serves(cursor: number): boolean {
    if (this.broken || cursor !== this.position) return false;
    return this.bytes > 0 || this.ended || Date.now() - this.heardAt < SILENT_MS;
  }

  /** Whether the tail is dead (broken, or silent past trust): the reader closes it and reads plainly. */
  get dead(): boolean {
    return this.broken || (this.bytes === 0 && !this.ended && Date.now() - this.heardAt >= SILENT_MS);
  }

  /** The held bytes from the tail's offset (call only when `serves`), at most `max`, into `into` when given. */
  take(max: number, into?: Buffer): OutputChunk {
    this.idle.refresh();
    const want = Math.min(max, this.bytes, into?.length ?? max);
    if (want === 0) return { data: EMPTY, next: this.position, closed: this.ended };
    let data: Buffer;
    if (!into && this.held[0]!.length >= want) {
      data = this.held[0]!.subarray(0, want);
    } else {
      data = into ? into.subarray(0, want) : Buffer.allocUnsafe(want);
      let at = 0;
      for (const chunk of this.held) {
        if (at === want) break;
        at += chunk.copy(data, at, 0, Math.min(chunk.length, want - at));
      }
    }
    let left = want;
    while (left > 0) {
      const first = this.held[0]!;
      if (first.length <= left) {
        this.held.shift();
        left -= first.length;
      } else {
        this.held[0] = first.subarray(left);
        left = 0;
      }
    }
    this.bytes -= want;
    this.position += want;
    if (this.bytes < HIGH_WATER / 2 && this.res?.isPaused()) this.res.resume();
    return { data, next: this.position, closed: this.ended && this.bytes === 0 };
  }

  /** Resolves when bytes arrive, the body ends or breaks, or after `timeoutMs`. */
  changed(timeoutMs: number): Promise<void> {
    if (this.bytes > 0 || this.ended || this.broken) return Promise.resolve();
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
    this.res?.destroy();
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
