/**
 * Content-addressed artifact store: large payloads (command output, file bytes) live here as files named by their
 * sha256, and events carry only {digest, size} (DESIGN §3). Files are immutable once published.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, link, mkdir, open, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Writable } from 'node:stream';

export interface ArtifactRef {
  digest: string;
  size: number;
}

export class ArtifactStore {
  constructor(readonly root: string) {}

  pathOf(digest: string): string {
    if (!/^sha256:[0-9a-f]{64}$/.test(digest)) throw new Error(`not an artifact digest: ${digest}`);
    return path.join(this.root, digest.slice(7, 9), digest.slice(7));
  }

  /**
   * Publish a file's bytes. Hashes while copying into a temporary file, then renames it into place, so a crash
   * leaves either nothing or a whole artifact. A hardlink is tried first when the source is immutable from now on.
   */
  async putFile(source: string, opts: { immutableSource?: boolean } = {}): Promise<ArtifactRef> {
    await mkdir(this.root, { recursive: true });
    const hash = createHash('sha256');
    const tmp = path.join(this.root, `.tmp-${randomUUID()}`);
    let size = 0;
    if (opts.immutableSource) {
      await pipeline(createReadStream(source), new Writable({ write(c: Buffer, _e, cb) { hash.update(c); size += c.length; cb(); } }));
      const ref = { digest: `sha256:${hash.digest('hex')}`, size };
      const dest = this.pathOf(ref.digest);
      await mkdir(path.dirname(dest), { recursive: true });
      try {
        await link(source, tmp);
        await rename(tmp, dest);
        return ref;
      } catch {
        await rm(tmp, { force: true });
        return this.copyIn(source, ref);
      }
    }
    const out = await open(tmp, 'w');
    try {
      await pipeline(
        createReadStream(source),
        new Writable({
          write(chunk: Buffer, _enc, cb) {
            hash.update(chunk);
            size += chunk.length;
            out.write(chunk).then(() => cb(), cb);
          },
        }),
      );
      await out.sync();
    } finally {
      await out.close();
    }
    const ref = { digest: `sha256:${hash.digest('hex')}`, size };
    await this.publish(tmp, ref);
    return ref;
  }

  async putBytes(bytes: Buffer): Promise<ArtifactRef> {
    const ref = { digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, size: bytes.length };
    if (await this.has(ref)) return ref;
    await mkdir(this.root, { recursive: true });
    const tmp = path.join(this.root, `.tmp-${randomUUID()}`);
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(bytes);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await this.publish(tmp, ref);
    return ref;
  }

  async has(ref: ArtifactRef): Promise<boolean> {
    try {
      return (await stat(this.pathOf(ref.digest))).size === ref.size;
    } catch {
      return false;
    }
  }

  read(ref: ArtifactRef, start = 0): NodeJS.ReadableStream {
    return createReadStream(this.pathOf(ref.digest), { start });
  }

  private async copyIn(source: string, expected: ArtifactRef): Promise<ArtifactRef> {
    const copied = await this.putFile(source);
    if (copied.digest !== expected.digest) throw new Error(`artifact source ${source} changed while being saved`);
    return copied;
  }

  private async publish(tmp: string, ref: ArtifactRef): Promise<void> {
    const dest = this.pathOf(ref.digest);
    await mkdir(path.dirname(dest), { recursive: true });
    await chmod(tmp, 0o444);
    await rename(tmp, dest);
  }
}
