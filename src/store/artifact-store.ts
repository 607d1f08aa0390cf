/**
 * Content-addressed artifact store: large payloads (command output, file bytes) live here as files named by their
 * sha256, and events carry only {digest, size} (DESIGN §3). Files are immutable once published; each publish of the
 * same bytes renews the file's mtime, so retention can tell an artifact no recent holder saved.
 */
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, createReadStream, openSync, read } from 'node:fs';
import { mkdir, open, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import type { ArtifactArchive } from './artifact-archive.ts';
import { type ArtifactCopier, sharedCopier } from './artifact-copy.ts';

export interface ArtifactRef {
  digest: string;
  size: number;
}

const readAt = (fd: number, buffer: Buffer, offset: number, length: number, position: number): Promise<number> =>
  new Promise((resolve, reject) => read(fd, buffer, offset, length, position, (e, n) => (e ? reject(e) : resolve(n))));

export class ArtifactStore {
  /** `copier` copies local files off the main thread (putFilePrefix): the process's shared one unless given. */
  constructor(
    readonly root: string,
    private readonly copier: ArtifactCopier = sharedCopier,
  ) {}

  pathOf(digest: string): string {
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`not an artifact digest: ${digest}`);
    return path.join(this.root, digest.slice(7, 9), digest.slice(7));
  }

  /**
   * Publish a byte stream. Hashes while writing a temporary file, syncs it, then publishes it, so a crash leaves
   * either nothing or a whole artifact. Each chunk is written before the next is asked for, so a producer may reuse
   * one buffer.
   */
  async putChunks(chunks: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<ArtifactRef> {
    await mkdir(this.root, { recursive: true });
    const hash = createHash('sha256');
    const tmp = this.tmpPath();
    let size = 0;
    const out = await open(tmp, 'w');
    try {
      for await (const chunk of chunks) {
        hash.update(chunk);
        size += chunk.length;
        await out.write(chunk);
      }
      await out.chmod(0o444);
      await out.sync();
    } catch (e) {
      await out.close();
      await rm(tmp, { force: true });
      throw e;
    }
    await out.close();
    return this.publish(tmp, { digest: `sha256:${hash.digest('hex')}`, size });
  }

  /**
   * Publish the first `size` bytes of a local file (a spool a stray writer may still append to) without passing
   * them through this thread: the copier copies, hashes and syncs them in its worker. Fails, publishing nothing,
   * when the file holds fewer bytes or the worker fails.
   */
  async putFilePrefix(source: string, size: number): Promise<ArtifactRef> {
    await mkdir(this.root, { recursive: true });
    const tmp = this.tmpPath();
    let digest: string;
    try {
      digest = await this.copier.copy(source, tmp, size);
    } catch (e) {
      await rm(tmp, { force: true });
      throw e;
    }
    return this.publish(tmp, { digest, size });
  }

  putFile(source: string): Promise<ArtifactRef> {
    return this.putChunks(createReadStream(source));
  }

  putBytes(bytes: Buffer): Promise<ArtifactRef> {
    return this.putChunks([bytes]);
  }

  private tmpPath(): string {
    return path.join(this.root, `.tmp-${randomUUID()}`);
  }

  /**
   * Renames a synced, read-only temporary file into place; an artifact already there is kept, its mtime renewed (one
   * retention is removing meanwhile is published again from this copy).
   */
  private async publish(tmp: string, ref: ArtifactRef): Promise<ArtifactRef> {
    if ((await this.has(ref)) && (await this.renew(ref))) {
      await rm(tmp, { force: true });
      return ref;
    }
    const dest = this.pathOf(ref.digest);
    await mkdir(path.dirname(dest), { recursive: true });
    await rename(tmp, dest);
    return ref;
  }

  private async renew(ref: ArtifactRef): Promise<boolean> {
    const now = new Date();
    return utimes(this.pathOf(ref.digest), now, now).then(
      () => true,
      () => false,
    );
  }

  /**
   * Retention of one artifact: unless it was published at or after `publishedBefore` (another holder saved the same
   * bytes since, and still needs them), it is removed, or moved into `archive`. An empty artifact is always kept (every
   * empty stream shares it). The file is first renamed aside, so a publish racing with this either renewed it before
   * (then it is put back) or finds it gone and publishes its own copy.
   */
  async expire(ref: ArtifactRef, publishedBefore: number, archive?: ArtifactArchive): Promise<'removed' | 'archived' | 'kept'> {
    const file = this.pathOf(ref.digest);
    const fresh = async (p: string) => (await stat(p)).mtimeMs >= publishedBefore;
    try {
      if (ref.size === 0 || (await fresh(file))) return 'kept';
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return archive ? 'archived' : 'removed';
      throw e;
    }
    const aside = this.tmpPath();
    try {
      await rename(file, aside);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return archive ? 'archived' : 'removed';
      throw e;
    }
    if (await fresh(aside)) {
      await rename(aside, file);
      return 'kept';
    }
    if (!archive) {
      await rm(aside, { force: true });
      return 'removed';
    }
    try {
      await archive.moveIn(aside, ref.digest);
    } catch (e) {
      await rename(aside, file); // kept where it was: the pass reports the failure
      throw e;
    }
    return 'archived';
  }

  async has(ref: ArtifactRef): Promise<boolean> {
    try {
      return (await stat(this.pathOf(ref.digest))).size === ref.size;
    } catch {
      return false;
    }
  }

  /**
   * Up to `length` bytes from `start`, in one buffer (`into`, when given, else a new one): what a reader by cursor
   * needs, without a stream's chunks to join. Short only at the end of the artifact. The file is opened and closed
   * synchronously (microseconds for a local file, where each is a thread-pool round trip otherwise); the bytes are
   * read asynchronously.
   */
  async readRange(ref: ArtifactRef, start: number, length: number, into?: Buffer): Promise<Buffer> {
    const want = Math.max(0, Math.min(length, ref.size - start, into?.length ?? Infinity));
    if (want === 0) return Buffer.alloc(0);
    const data = into ? into.subarray(0, want) : Buffer.allocUnsafe(want);
    const fd = openSync(this.pathOf(ref.digest), 'r');
    try {
      let got = 0;
      while (got < want) {
        const bytesRead = await readAt(fd, data, got, want - got, start + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return data.subarray(0, got);
    } finally {
      closeSync(fd);
    }
  }

  /** The bytes from `start` (inclusive) to `end` (exclusive). */
  read(ref: ArtifactRef, start = 0, end = ref.size): NodeJS.ReadableStream {
    // One read per requested range up to 1 MiB (the default 64 KiB is a thread-pool round trip per 64 KiB).
    const highWaterMark = Math.min(Math.max(end - start, 64 * 1024), 1024 * 1024);
    return createReadStream(this.pathOf(ref.digest), { start, end: Math.max(start, end) - 1, highWaterMark });
  }
}
