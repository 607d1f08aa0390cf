/**
 * Reads one output stream for a follower. Reads grow (doubling, up to `maxBytes`) while they come back full (a busy
 * stream: fewer runtime round trips per byte) and fall back to one chunk when one does not (a stream that trickles,
 * as an interactive one does). While the caller sends the bytes it has, the next reads are already under way: up to
 * `depth`, each one where the one before would end if full (a short one makes those after it useless: they are
 * dropped). A budget bounds each read and the reads made ahead together (a follower's client can take only so
 * much: what is read for it is server memory until sent). Large reads go into buffers that take turns, so a busy stream
 * leaves no buffer per read to the garbage collector (each one costs a major collection sooner); they are let go when
 * reads shrink again. The bytes of a read are valid until the next call to `next`.
 */
import type { OutputRead } from '../runtime/runtime-api.ts';

export type ReadAt = (cursor: number, maxBytes: number, into?: Buffer) => Promise<OutputRead>;

/**
 * Gives a read of at most one chunk the buffer it fills (at least `maxBytes` long), whose bytes then belong to the
 * caller (the reader never reuses it): e.g. one a socket hands back once it has written it.
 */
export type ChunkBuffer = (maxBytes: number) => Buffer;

interface Read {
  cursor: number;
  result: Promise<OutputRead>;
  maxBytes: number;
  buffer?: Buffer;
}

export class StreamReader {
  private size: number;
  /** Reads under way, in cursor order. */
  private readonly ahead: Read[] = [];
  /** The buffer whose bytes the caller holds (the last result), and the free ones. */
  private held?: Buffer;
  private readonly spare: Buffer[] = [];
  /** Whether the last read came back full (the stream has more bytes than it was asked for, likely). */
  private full = false;

  constructor(
    private readonly readAt: ReadAt,
    private readonly chunkBytes: number,
    private readonly maxBytes: number,
    /** Three: with two, a follower of a command still writing (the writer and the reads share the cores) was slower. */
    private readonly depth = 3,
    private readonly chunkBuffer?: ChunkBuffer,
  ) {
    this.size = chunkBytes;
  }

  /**
   * The read at `cursor` (the one made ahead for it, if any, else one of at most `budget` bytes). The caller is done
   * with the previous result's bytes.
   */
  async next(cursor: number, budget = Infinity): Promise<OutputRead> {
    this.release(this.held);
    this.held = undefined;
    // Reads made ahead for other cursors are dropped, with their buffers (a read may still be filling its buffer).
    while (this.ahead.length > 0 && this.ahead[0]!.cursor !== cursor) this.ahead.shift();
    const read = this.ahead.shift() ?? this.start(cursor, budget);
    const got = await read.result;
    this.size = got.data.length >= read.maxBytes ? Math.min(Math.max(read.maxBytes * 2, this.chunkBytes), this.maxBytes) : this.chunkBytes;
    if (got.data.length > 0) this.held = read.buffer;
    else this.release(read.buffer);
    if (got.data.length < read.maxBytes) this.ahead.length = 0; // they assumed a full read
    this.full = got.data.length >= read.maxBytes;
    return got;
  }

  /** True after a read that came back full: reading ahead is likely worth it. */
  get streaming(): boolean {
    return this.full;
  }

  /**
   * Makes the reads from `cursor` on now (up to `depth` under way, of at most `budget` bytes together, none smaller
   * than a chunk); the next `next(cursor)` takes the first.
   */
  readAhead(cursor: number, budget = Infinity): void {
    if (this.ahead.length > 0 && this.ahead[0]!.cursor !== cursor) this.ahead.length = 0;
    let left = this.ahead.reduce((rest, read) => rest - read.maxBytes, budget);
    while (this.ahead.length < this.depth && left >= this.chunkBytes) {
      const last = this.ahead.at(-1);
      const read = this.start(last ? last.cursor + last.maxBytes : cursor, left);
      this.ahead.push(read);
      left -= read.maxBytes;
    }
  }

  private start(cursor: number, budget: number): Read {
    const maxBytes = Math.max(1, Math.min(this.size, budget));
    // A read of one chunk at most fills a buffer the caller gives (never taken back), if it gives one.
    const buffer = maxBytes > this.chunkBytes ? this.take() : undefined;
    const result = this.readAt(cursor, maxBytes, buffer ?? this.chunkBuffer?.(maxBytes));
    result.catch(() => undefined); // awaited by `next`, or dropped with the follower
    return { cursor, result, maxBytes, buffer };
  }

  private take(): Buffer {
    return this.spare.pop() ?? Buffer.allocUnsafe(this.maxBytes);
  }

  /** Keeps free buffers only while reads are large. */
  private release(buffer: Buffer | undefined): void {
    if (this.size <= this.chunkBytes) this.spare.length = 0;
    else if (buffer) this.spare.push(buffer);
  }
}
