/**
 * Where checkpoints are kept under the data directory: packs (one file of concatenated blobs per capture, durable
 * under packs/<name> once finished) and manifests (content-addressed JSON at manifests/<hex>.json, the checkpoint id
 * being `sha256:<hex>`). Both are written to a temporary name, fsynced, then renamed, so a crash leaves either the
 * whole file or none.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readSync, renameSync, rmSync, writeSync, readFileSync, existsSync, constants } from 'node:fs';
import { join } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { BlobLocation, BlobSource, PackWriter, TreeManifest } from '../../providers/file-host.ts';
import { errorCode } from '../../providers/spool-dir.ts';

export interface FinishablePackWriter extends PackWriter {
  /** Writes what is buffered, fsyncs, and renames the pack to its name (an empty pack is dropped instead). */
  finish(): Promise<void>;
  /** Drops the pack. */
  abort(): Promise<void>;
}

const PACK_NAME = /^pk_[0-9a-f]{32}$/;
const CHECKPOINT_ID = /^sha256:([0-9a-f]{64})$/;
/** Blobs are gathered into writes this large (most files of a tree are far smaller). */
const WRITE_BUFFER_BYTES = 4 << 20;
const READ_BUFFER_BYTES = 1 << 20;

/** fsync of a directory: the rename into it survives a crash. */
function syncDirectory(dir: string): void {
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, bytes: Buffer, position: number): void {
  for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done, position + done);
}

class PackFile implements FinishablePackWriter {
  readonly pack = `pk_${randomBytes(16).toString('hex')}`;
  private readonly fd: number;
  private readonly buffer = Buffer.allocUnsafe(WRITE_BUFFER_BYTES);
  private flushed = 0;
  private buffered = 0;
  private closed = false;

  constructor(private readonly dir: string) {
    this.fd = openSync(this.tmpPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  }

  private get tmpPath(): string {
    return join(this.dir, `.tmp-${this.pack}`);
  }

  get offset(): number {
    return this.flushed + this.buffered;
  }

  async write(bytes: Buffer): Promise<void> {
    if (this.buffered + bytes.length > this.buffer.length) this.flush();
    if (bytes.length >= this.buffer.length) {
      writeAll(this.fd, bytes, this.flushed);
      this.flushed += bytes.length;
      return;
    }
    bytes.copy(this.buffer, this.buffered);
    this.buffered += bytes.length;
  }

  async truncate(offset: number): Promise<void> {
    if (offset >= this.flushed) {
      this.buffered = Math.min(this.buffered, offset - this.flushed);
      return;
    }
    this.buffered = 0;
    ftruncateSync(this.fd, offset);
    this.flushed = offset;
  }

  async finish(): Promise<void> {
    this.flush();
    this.closed = true;
    if (this.flushed === 0) {
      closeSync(this.fd);
      rmSync(this.tmpPath, { force: true });
      return;
    }
    try {
      fsyncSync(this.fd);
    } finally {
      closeSync(this.fd);
    }
    renameSync(this.tmpPath, join(this.dir, this.pack));
    syncDirectory(this.dir);
  }

  async abort(): Promise<void> {
    if (!this.closed) closeSync(this.fd);
    this.closed = true;
    rmSync(this.tmpPath, { force: true });
  }

  private flush(): void {
    if (this.buffered === 0) return;
    writeAll(this.fd, this.buffer.subarray(0, this.buffered), this.flushed);
    this.flushed += this.buffered;
    this.buffered = 0;
  }
}

export class CheckpointPacks {
  private readonly packsDir: string;
  private readonly manifestsDir: string;

  constructor(root: string) {
    this.packsDir = join(root, 'packs');
    this.manifestsDir = join(root, 'manifests');
    mkdirSync(this.packsDir, { recursive: true, mode: 0o700 });
    mkdirSync(this.manifestsDir, { recursive: true, mode: 0o700 });
  }

  async writer(): Promise<FinishablePackWriter> {
    return new PackFile(this.packsDir);
  }

  /** Reads blobs of finished packs, one at a time. A chunk is valid until the next one is asked for (one buffer, reused). */
  source(): BlobSource {
    const packsDir = this.packsDir;
    const buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
    return {
      async *read(location: BlobLocation, size: number): AsyncIterable<Buffer> {
        if (size === 0) return; // an empty blob may name a pack that was never kept (nothing was written to it)
        if (!PACK_NAME.test(location.pack) || !Number.isSafeInteger(location.offset) || location.offset < 0) {
          throw new BerthError('invalid_request', 'A blob location names no pack of this store.', { pack: location.pack, offset: location.offset });
        }
        let fd: number;
        try {
          fd = openSync(join(packsDir, location.pack), constants.O_RDONLY);
        } catch (e) {
          if (errorCode(e) === 'ENOENT') throw new BerthError('not_found', 'A checkpoint pack is missing.', { pack: location.pack });
          throw e;
        }
        try {
          for (let done = 0; done < size; ) {
            const read = readSync(fd, buffer, 0, Math.min(buffer.length, size - done), location.offset + done);
            if (read === 0) throw new BerthError('internal', 'A checkpoint pack ends before the blob it should hold.', { pack: location.pack, offset: location.offset, size });
            done += read;
            yield buffer.subarray(0, read);
          }
        } finally {
          closeSync(fd);
        }
      },
    };
  }

  /** Stores the manifest durably (once; the same tree gives the same id) and returns its checkpoint id. */
  async saveManifest(manifest: TreeManifest): Promise<string> {
    const json = Buffer.from(JSON.stringify(manifest));
    const hex = createHash('sha256').update(json).digest('hex');
    const path = join(this.manifestsDir, `${hex}.json`);
    if (existsSync(path)) return `sha256:${hex}`;
    const tmp = join(this.manifestsDir, `.tmp-${hex}-${randomBytes(4).toString('hex')}`);
    const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
    try {
      writeAll(fd, json, 0);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
    syncDirectory(this.manifestsDir);
    return `sha256:${hex}`;
  }

  async loadManifest(id: string): Promise<TreeManifest> {
    const match = CHECKPOINT_ID.exec(id);
    const missing = (): BerthError => new BerthError('not_found', 'No such checkpoint.', { checkpoint: id });
    if (!match) throw missing();
    let json: Buffer;
    try {
      json = readFileSync(join(this.manifestsDir, `${match[1]}.json`));
    } catch (e) {
      if (errorCode(e) === 'ENOENT') throw missing();
      throw e;
    }
    if (createHash('sha256').update(json).digest('hex') !== match[1]) {
      throw new BerthError('internal', 'A stored checkpoint manifest does not match its id.', { checkpoint: id });
    }
    return JSON.parse(json.toString()) as TreeManifest;
  }
}
