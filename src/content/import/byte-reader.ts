/**
 * Pull-based reading of an async byte stream: exact-length reads for headers, and bounded streaming for bodies, so an
 * archive member's bytes flow to disk without being gathered in memory. `close()` stops the source (an HTTP body, a
 * decompressor) as soon as the reader is no longer wanted: a refused import stops reading.
 */
/** A request body, a file stream, a decompressor's output, or bytes in hand. */
export type Body = AsyncIterable<Uint8Array> | Iterable<Uint8Array>;

export class ByteReader {
  private readonly source: AsyncIterator<Uint8Array>;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private ended = false;
  /** Bytes handed out so far (reads and skips). */
  position = 0;

  constructor(source: Body) {
    this.source =
      Symbol.asyncIterator in source
        ? source[Symbol.asyncIterator]()
        : (async function* () {
            yield* source;
          })();
  }

  /** Buffer at least `n` bytes if the stream has them; false when it ends first. */
  private async fill(n: number): Promise<boolean> {
    while (this.buffered < n && !this.ended) {
      const next = await this.source.next();
      if (next.done) this.ended = true;
      else if (next.value.byteLength > 0) {
        const chunk = Buffer.isBuffer(next.value) ? next.value : Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
        this.chunks.push(chunk);
        this.buffered += chunk.length;
      }
    }
    return this.buffered >= n;
  }

  /** The next `n` bytes without consuming them (fewer at the end of the stream). */
  async peek(n: number): Promise<Buffer> {
    await this.fill(n);
    const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    this.chunks = all.length ? [all] : [];
    return all.subarray(0, n);
  }

  /** Exactly `n` bytes, or fewer only if the stream ended. */
  async read(n: number): Promise<Buffer> {
    await this.fill(n);
    const take = Math.min(n, this.buffered);
    let out: Buffer;
    if (this.chunks[0] && this.chunks[0].length >= take) {
      out = this.chunks[0].subarray(0, take);
      this.consume(take);
    } else {
      out = Buffer.allocUnsafe(take);
      let filled = 0;
      while (filled < take) {
        const head = this.chunks[0];
        const part = Math.min(head.length, take - filled);
        head.copy(out, filled, 0, part);
        filled += part;
        this.consume(part);
      }
    }
    return out;
  }

  /** Up to `n` bytes as they arrive, in chunks; ends early only if the stream does. */
  async *stream(n: number): AsyncGenerator<Buffer> {
    let left = n;
    while (left > 0) {
      if (this.buffered === 0 && !(await this.fill(1))) return;
      const head = this.chunks[0];
      const part = Math.min(head.length, left);
      const out = head.subarray(0, part);
      this.consume(part);
      left -= part;
      yield out;
    }
  }

  /** Discard `n` bytes; returns how many were there. */
  async skip(n: number): Promise<number> {
    let skipped = 0;
    for await (const chunk of this.stream(n)) skipped += chunk.length;
    return skipped;
  }

  /** The rest of the stream, buffered bytes first. */
  async *rest(): AsyncGenerator<Buffer> {
    while (this.buffered > 0 || (await this.fill(1))) {
      const head = this.chunks.shift() as Buffer;
      this.buffered -= head.length;
      this.position += head.length;
      yield head;
    }
  }

  async close(): Promise<void> {
    this.chunks = [];
    this.buffered = 0;
    if (!this.ended) {
      this.ended = true;
      await this.source.return?.();
    }
  }

  private consume(n: number): void {
    this.position += n;
    this.buffered -= n;
    while (n > 0) {
      const head = this.chunks[0];
      if (head.length <= n) {
        n -= head.length;
        this.chunks.shift();
      } else {
        this.chunks[0] = head.subarray(n);
        n = 0;
      }
    }
  }
}
