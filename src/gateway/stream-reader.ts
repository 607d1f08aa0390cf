/**
 * Reads one output stream for a follower. Reads grow (doubling, up to `maxBytes`) while they come back full (a busy
 * stream: fewer runtime round trips per byte) and fall back to one chunk when one does not (a stream that trickles,
 * as an interactive one does). The next read can be made ahead, while the caller sends the bytes it has. Large reads
 * go into two buffers that take turns, so a busy stream leaves no buffer per read to the garbage collector (each one
 * costs a major collection sooner); they are let go when reads shrink again. The bytes of a read are valid until the
 * next call to `next`.
 */
import type { OutputRead } from '../runtime/runtime-api.ts';

export type ReadAt = (cursor: number, maxBytes: number, into?: Buffer) => Promise<OutputRead>;

interface Read {
  cursor: number;
  result: Promise<OutputRead>;
  maxBytes: number;
  buffer?: Buffer;
}

export class StreamReader {
  private size: number;
  private ahead?: Read;
  /** The buffer whose bytes the caller holds (the last result), and the free one. */
  private held?: Buffer;
  private spare?: Buffer;

  constructor(
    private readonly readAt: ReadAt,
    private readonly chunkBytes: number,
    private readonly maxBytes: number,
  ) {
    this.size = chunkBytes;
  }

  /** The read at `cursor` (the one made ahead for it, if any). The caller is done with the previous result's bytes. */
  async next(cursor: number): Promise<OutputRead> {
    this.release(this.held);
    this.held = undefined;
    // A read made ahead for another cursor is dropped, with its buffer (the read may still be filling it).
    const read = this.ahead?.cursor === cursor ? this.ahead : this.start(cursor);
    this.ahead = undefined;
    const got = await read.result;
    this.size = got.data.length >= read.maxBytes ? Math.min(read.maxBytes * 2, this.maxBytes) : this.chunkBytes;
    if (got.data.length > 0) this.held = read.buffer;
    else this.release(read.buffer);
    return got;
  }

  /** Starts the read at `cursor` now; the next `next(cursor)` takes it. */
  readAhead(cursor: number): void {
    this.ahead = this.start(cursor);
  }

  private start(cursor: number): Read {
    const maxBytes = this.size;
    const buffer = maxBytes > this.chunkBytes ? this.take(maxBytes) : undefined;
    const result = this.readAt(cursor, maxBytes, buffer);
    result.catch(() => undefined); // awaited by `next`, or dropped with the follower
    return { cursor, result, maxBytes, buffer };
  }

  private take(bytes: number): Buffer {
    const spare = this.spare;
    this.spare = undefined;
    return spare && spare.length >= bytes ? spare : Buffer.allocUnsafe(this.maxBytes);
  }

  /** Keeps a free buffer only while reads are large. */
  private release(buffer: Buffer | undefined): void {
    this.spare = this.size > this.chunkBytes ? (buffer ?? this.spare) : undefined;
  }
}
