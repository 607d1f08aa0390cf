/**
 * The bytes of a file whose version is known, sent as they are read. The version was taken with the file's stats
 * before the first byte; a command of the same turn may change the file while it is sent. So the last chunk is held
 * back until the stats are looked at again: changed meanwhile (ctime, mtime or size), the stream fails instead, the
 * answer stops short of its content-length, and no one is handed bytes under a version they are not.
 */
import { closeSync, createReadStream, fstatSync, type BigIntStats } from 'node:fs';
import { pipeline, Transform, type Readable } from 'node:stream';
import { BerthError } from '../../../schemas/errors.ts';

/** Streams `length` bytes from `start` of the file open as `fd` (closed when the stream is over, however it ends). */
export function checkedFileStream(fd: number, start: number, length: number, stats: BigIntStats, path: string, chunkBytes: number): Readable {
  const source = createReadStream('', { fd, start, end: start + length - 1, highWaterMark: chunkBytes, autoClose: false });
  let held: Buffer | undefined;
  const check = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      const previous = held;
      held = chunk;
      done(null, previous);
    },
    flush(done) {
      const now = fstatSync(fd, { bigint: true });
      if (now.ctimeNs !== stats.ctimeNs || now.mtimeNs !== stats.mtimeNs || now.size !== stats.size) {
        done(new BerthError('stale_version', 'The file changed while it was read; read it again.', { path }));
        return;
      }
      done(null, held);
    },
  });
  return pipeline(source, check, () => closeSync(fd));
}
