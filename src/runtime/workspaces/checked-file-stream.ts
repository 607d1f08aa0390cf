/**
 * The bytes of a file whose version is known, sent as they are read. The version was taken with the file's stats
 * before the first byte; a command of the same turn may change the file while it is sent. So the last chunk is held
 * back until the stats are looked at again: changed meanwhile (ctime, mtime or size), or shorter than it was, the
 * stream fails instead, the answer stops short of its content-length, and no one is handed bytes under a version
 * they are not. The bytes, the last chunk too once checked, may instead be sent to a socket natively (`sendTo`).
 */
import { close, fstat, fstatSync, read, readSync, type BigIntStats } from 'node:fs';
import { Readable } from 'node:stream';
import { BerthError } from '../../../schemas/errors.ts';
import { hasSendFile, poolSendFree, sendFile, sendFileNow, type SendOutcome, type SendRange } from '../../providers/send-file.ts';

/** What is left for the ordinary reads after a `sendTo`: at least the held-back last chunk. */
const TAIL_BYTES = 64 * 1024;
/**
 * The most `sendTo` sends on the event loop's own thread (about 1 ms of copying here): a client draining as fast as
 * it is sent could otherwise hold the loop for a whole 64 MiB file. The rest goes on the pool.
 */
const NOW_BYTES = 4 * 1024 * 1024;

/**
 * Streams `length` bytes from `start` of the file open as `fd`. The stream owns the descriptor: it is closed once
 * the stream is over however it ends, never while a read or send of it is under way.
 */
export class CheckedFileStream extends Readable {
  private position: number;
  private readonly end: number;
  /** A read, fstat or send of the descriptor under way: a destroy meanwhile closes it when that is over. */
  private busy = false;
  private closeWhenIdle: (() => void) | undefined;

  constructor(
    private readonly fd: number,
    start: number,
    length: number,
    private readonly stats: BigIntStats,
    private readonly path: string,
    private readonly chunkBytes: number,
  ) {
    super({ highWaterMark: chunkBytes });
    this.position = start;
    this.end = start + length;
  }

  /** Whether `sendTo` would send anything now: nothing read yet, more than the last chunk to go, the addon built. */
  canSend(): boolean {
    return this.readableLength === 0 && !this.busy && this.end - this.position > TAIL_BYTES && hasSendFile();
  }

  /**
   * Sends the bytes straight to the socket open as `socketFd` (nothing else may write to it meanwhile), the held-back
   * last chunk too once the file's stats are checked as ever: what the socket takes at once, then the rest on the
   * pool if a send is free there. The stream then reads on from wherever that stopped (a client that stalled), so
   * piping it next sends the rest, and ends at once when nothing is left.
   */
  async sendTo(socketFd: number): Promise<void> {
    this.busy = true;
    try {
      if (this.took(sendFileNow(this.range(socketFd, NOW_BYTES))) && poolSendFree()) this.took(await sendFile(this.range(socketFd)));
    } finally {
      this.busy = false;
      this.closeWhenIdle?.();
    }
  }

  /** From where the stream is: the bytes before the last chunk, then what is left of it (none past `most` bytes). */
  private range(socketFd: number, most = Infinity): SendRange {
    const tailStart = this.end - TAIL_BYTES;
    const before = Math.max(0, tailStart - this.position);
    const tail = before > most ? 0 : this.end - Math.max(this.position, tailStart);
    return { socketFd, fileFd: this.fd, offset: this.position, length: Math.min(before, most), tail, under: this.stats };
  }

  /** Moves on past what a send took; whether there is more to send (the file unchanged). */
  private took({ sent, changed }: SendOutcome): boolean {
    this.position += sent;
    if (changed) this.destroy(this.changed());
    return !changed && this.position < this.end;
  }

  override _read(): void {
    if (this.position === this.end) return void this.push(null); // all sent, checked, by `sendTo`
    const buffer = Buffer.allocUnsafe(Math.min(this.chunkBytes, this.end - this.position));
    if (buffer.length <= TAIL_BYTES) return this.readTail(buffer);
    this.busy = true;
    read(this.fd, buffer, 0, buffer.length, this.position, (error, bytesRead) => {
      this.busy = false;
      if (this.closeWhenIdle) return this.closeWhenIdle();
      if (error) return this.destroy(error);
      if (bytesRead === 0) return this.destroy(this.changed()); // shrunk since its version was taken
      this.position += bytesRead;
      const chunk = buffer.subarray(0, bytesRead);
      if (this.position < this.end) {
        this.push(chunk);
        return;
      }
      this.busy = true;
      fstat(this.fd, { bigint: true }, (statError, now) => {
        this.busy = false;
        if (this.closeWhenIdle) return this.closeWhenIdle();
        if (statError) return this.destroy(statError);
        if (!this.unchanged(now)) return this.destroy(this.changed());
        this.push(chunk);
        this.push(null);
      });
    });
  }

  /**
   * The last chunk when it is small (what `sendTo` leaves): read and checked at once, where two trips through the
   * thread pool would cost more than the work.
   */
  private readTail(buffer: Buffer): void {
    let now: BigIntStats;
    let bytesRead: number;
    try {
      bytesRead = readSync(this.fd, buffer, 0, buffer.length, this.position);
      now = fstatSync(this.fd, { bigint: true });
    } catch (e) {
      this.destroy(e as Error);
      return;
    }
    if (bytesRead < buffer.length || !this.unchanged(now)) {
      this.destroy(this.changed());
      return;
    }
    this.position += bytesRead;
    this.push(buffer);
    this.push(null);
  }

  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    const closeFd = () => close(this.fd, () => done(error));
    if (this.busy) this.closeWhenIdle = closeFd;
    else closeFd();
  }

  /** Whether the file's stats are still those its version was taken with (ctime, mtime, size). */
  private unchanged(now: BigIntStats): boolean {
    return now.ctimeNs === this.stats.ctimeNs && now.mtimeNs === this.stats.mtimeNs && now.size === this.stats.size;
  }

  private changed(): BerthError {
    return new BerthError('stale_version', 'The file changed while it was read; read it again.', { path: this.path });
  }
}
