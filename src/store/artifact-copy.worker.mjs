/**
 * The worker thread of artifact-copy.ts: copies the first `size` bytes of a local file into a new temporary file,
 * hashes the copy (sha256), makes it read-only and syncs it, so none of those bytes pass through the main thread.
 * Plain JavaScript importing only node: modules, so it loads alike under node, tsx and vitest.
 */
import { createHash } from 'node:crypto';
import { closeSync, constants, copyFileSync, fchmodSync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';

const CHUNK = 4 * 1024 * 1024;
/**
 * A source holding more than `size` bytes (a writer that escaped the command appends after the drain) is copied
 * whole by the kernel when the excess is at most this; past it, only `size` bytes are copied, through this thread.
 */
const KERNEL_COPY_EXCESS = 1024 * 1024;
const buffer = Buffer.allocUnsafe(CHUNK);

const short = (source, held, size) => new Error(`${source} holds ${held} of ${size} bytes`);

/** Leaves `dest` holding exactly the first `size` bytes of `source`; answers it open for reading and writing. */
function copyPrefix(source, dest, size) {
  const src = openSync(source, 'r');
  try {
    const held = fstatSync(src).size;
    if (held < size) throw short(source, held, size);
    if (held - size <= KERNEL_COPY_EXCESS) {
      // copy_file_range: the bytes go from page cache to page cache without a copy into this process.
      copyFileSync(source, dest, constants.COPYFILE_EXCL);
      const out = openSync(dest, 'r+');
      const copied = fstatSync(out).size;
      if (copied < size) {
        closeSync(out);
        throw short(source, copied, size);
      }
      ftruncateSync(out, size);
      return out;
    }
    const out = openSync(dest, 'wx+');
    for (let at = 0; at < size; ) {
      const n = readSync(src, buffer, 0, Math.min(CHUNK, size - at), at);
      if (n === 0) {
        closeSync(out);
        throw short(source, at, size);
      }
      for (let w = 0; w < n; ) w += writeSync(out, buffer, w, n - w, at + w);
      at += n;
    }
    return out;
  } finally {
    closeSync(src);
  }
}

/** The digest is taken from the copy itself: what is published is what was hashed. */
function copyAndHash({ source, dest, size }) {
  const fd = copyPrefix(source, dest, size);
  try {
    const hash = createHash('sha256');
    for (let at = 0; at < size; ) {
      const n = readSync(fd, buffer, 0, Math.min(CHUNK, size - at), at);
      if (n === 0) throw short(dest, at, size);
      hash.update(buffer.subarray(0, n));
      at += n;
    }
    fchmodSync(fd, 0o444);
    fsyncSync(fd);
    return `sha256:${hash.digest('hex')}`;
  } finally {
    closeSync(fd);
  }
}

parentPort.on('message', (job) => {
  try {
    parentPort.postMessage({ id: job.id, digest: copyAndHash(job) });
  } catch (e) {
    parentPort.postMessage({ id: job.id, error: e instanceof Error ? e.message : String(e), code: e?.code });
  }
});
