/**
 * The bytes of a file whose version is known, sent as they are read. The version was taken with the file's stats
 * before the first byte; a command of the same turn may change the file while it is sent. So the last chunk is held
 * back until the stats are looked at again: changed meanwhile (ctime, mtime or size), or shorter than it was, the
 * stream fails instead, the answer stops short of its content-length, and no one is handed bytes under a version
 * they are not.
 */
import { close, fstat, read, type BigIntStats } from 'node:fs';
import { Readable } from 'node:stream';
import { BerthError } from '../../../schemas/errors.ts';

/**
 * Streams `length` bytes from `start` of the file open as `fd`. The stream owns the descriptor: it is closed once
 * the stream is over however it ends, never while a read of it is under way.
 */
export function checkedFileStream(fd: number, start: number, length: number, stats: BigIntStats, path: string, chunkBytes: number): Readable {
  const end = start + length;
  let position = start;
  /** A read or fstat of the descriptor under way: a destroy meanwhile closes it when that is over. */
  let reading = false;
  let closeWhenRead: (() => void) | undefined;
  const changed = () => new BerthError('stale_version', 'The file changed while it was read; read it again.', { path });
  const stream = new Readable({
    highWaterMark: chunkBytes,
    read() {
      const buffer = Buffer.allocUnsafe(Math.min(chunkBytes, end - position));
      reading = true;
      read(fd, buffer, 0, buffer.length, position, (error, bytesRead) => {
        reading = false;
        if (closeWhenRead) return closeWhenRead();
        if (error) return stream.destroy(error);
        if (bytesRead === 0) return stream.destroy(changed()); // shrunk since its version was taken
        position += bytesRead;
        const chunk = buffer.subarray(0, bytesRead);
        if (position < end) {
          stream.push(chunk);
          return;
        }
        reading = true;
        fstat(fd, { bigint: true }, (statError, now) => {
          reading = false;
          if (closeWhenRead) return closeWhenRead();
          if (statError) return stream.destroy(statError);
          if (now.ctimeNs !== stats.ctimeNs || now.mtimeNs !== stats.mtimeNs || now.size !== stats.size) return stream.destroy(changed());
          stream.push(chunk);
          stream.push(null);
        });
      });
    },
    destroy(error, done) {
      const closeFd = () => close(fd, () => done(error));
      if (reading) closeWhenRead = closeFd;
      else closeFd();
    },
  });
  return stream;
}
