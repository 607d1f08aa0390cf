/**
 * A FIFO of bytes in one reused buffer that grows (doubling, up to about `limit`) only while its reader lags: what a
 * byte stream read ahead is copied in here out of the connection's reused read buffer (byte-stream.ts), so holding
 * it allocates nothing per read.
 */
const FIRST_CAPACITY = 1 << 20;

export class ByteRing {
  private buffer = Buffer.alloc(0);
  private start = 0;
  private held = 0;

  constructor(private readonly limit: number) {}

  get length(): number {
    return this.held;
  }

  /** Appends all of `bytes`, growing past `limit` only by what one append needs (the caller pauses its source). */
  push(bytes: Buffer): void {
    this.reserve(this.held + bytes.length);
    const capacity = this.buffer.length;
    const end = (this.start + this.held) % capacity;
    const first = Math.min(bytes.length, capacity - end);
    bytes.copy(this.buffer, end, 0, first);
    if (first < bytes.length) bytes.copy(this.buffer, 0, first);
    this.held += bytes.length;
  }

  /** Moves the first `count` bytes (at most `length`) into `into` at 0; answers how many. */
  shift(into: Buffer, count: number): number {
    const n = Math.min(count, this.held, into.length);
    const first = Math.min(n, this.buffer.length - this.start);
    this.buffer.copy(into, 0, this.start, this.start + first);
    if (first < n) this.buffer.copy(into, first, 0, n - first);
    this.start = (this.start + n) % (this.buffer.length || 1);
    this.held -= n;
    if (this.held === 0) this.start = 0;
    return n;
  }

  private reserve(size: number): void {
    if (size <= this.buffer.length) return;
    let capacity = Math.max(this.buffer.length * 2, FIRST_CAPACITY);
    while (capacity < size) capacity *= 2;
    const grown = Buffer.allocUnsafeSlow(Math.max(size, Math.min(capacity, this.limit)));
    const count = this.shift(grown, this.held);
    this.buffer = grown;
    this.held = count;
  }
}
