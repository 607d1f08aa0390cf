/**
 * Where checkpoints are kept under the data directory: packs (one file of concatenated blobs per capture, durable
 * under packs/<name> once finished) and manifests (content-addressed JSON at manifests/<hex>.json, the checkpoint id
 * being `sha256:<hex>`; a manifest whole, or its changes from a whole one). Both are written to a temporary name,
 * fsynced, then renamed, so a crash leaves either the whole file or none. A pack asks for room before each buffer it
 * writes: a capture copies what changed into the data directory, and one of a workspace of gigabytes, started while
 * there was room, would otherwise end under the event store's reserve (maintenance/disk-reserve.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, fdatasync, fsync, fsyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, write, writeSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { BlobLocation, BlobSource, PackWriter, TreeManifest } from '../../providers/file-host.ts';
import { errorCode } from '../../providers/spool-dir.ts';
import type { Room } from '../../content/room-check.ts';
import { applyDelta, deltaOf, isDelta, type ManifestDelta } from './manifest-delta.ts';

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
/** Manifests kept parsed, and their entries at most (a parsed entry is some hundred bytes). */
const RECENT_MANIFESTS = 4;
const RECENT_ENTRIES = 50_000;
/** Written bytes synced in the background this often while a pack is written. */
const SYNC_EVERY = 16 << 20;
const writeAsync = promisify(write);
const fsyncAsync = promisify(fsync);
const fdatasyncAsync = promisify(fdatasync);

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

async function writeAllAsync(fd: number, bytes: Buffer, position: number): Promise<void> {
  for (let done = 0; done < bytes.length; ) done += (await writeAsync(fd, bytes, done, bytes.length - done, position + done)).bytesWritten;
}

/**
 * A pack being written: blobs gathered into one buffer while the other is written by the thread pool, and the
 * written part synced in the background every SYNC_EVERY bytes, so the capture's hashing overlaps the disk's work
 * and finish() has little left to wait for.
 */
class PackFile implements FinishablePackWriter {
  readonly pack = `pk_${randomBytes(16).toString('hex')}`;
  private readonly fd: number;
  private current = Buffer.allocUnsafe(WRITE_BUFFER_BYTES);
  private spare = Buffer.allocUnsafe(WRITE_BUFFER_BYTES);
  /** Bytes handed to the disk (written, or being written from `spare`). */
  private flushed = 0;
  private buffered = 0;
  private writing: Promise<void> = Promise.resolve();
  private syncing: Promise<void> = Promise.resolve();
  private syncedAt = 0;
  private failure: unknown;
  private closed = false;

  constructor(
    private readonly dir: string,
    private readonly room: Room | undefined,
  ) {
    this.fd = openSync(this.tmpPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
  }

  private get tmpPath(): string {
    return join(this.dir, `.tmp-${this.pack}`);
  }

  get offset(): number {
    return this.flushed + this.buffered;
  }

  async write(bytes: Buffer): Promise<void> {
    if (this.buffered + bytes.length > this.current.length) await this.flush();
    if (bytes.length >= this.current.length) {
      await this.drained();
      await this.room?.(bytes.length);
      writeAll(this.fd, bytes, this.flushed);
      this.flushed += bytes.length;
      return;
    }
    bytes.copy(this.current, this.buffered);
    this.buffered += bytes.length;
  }

  async truncate(offset: number): Promise<void> {
    if (offset >= this.flushed) {
      this.buffered = Math.min(this.buffered, offset - this.flushed);
      return;
    }
    await this.drained(); // a write landing after the truncation would bring the bytes back
    this.buffered = 0;
    ftruncateSync(this.fd, offset);
    this.flushed = offset;
  }

  async finish(): Promise<void> {
    await this.flush();
    await this.drained();
    await this.syncing;
    this.closed = true;
    if (this.failure !== undefined) {
      closeSync(this.fd);
      rmSync(this.tmpPath, { force: true });
      throw this.failure;
    }
    if (this.flushed === 0) {
      closeSync(this.fd);
      rmSync(this.tmpPath, { force: true });
      return;
    }
    try {
      await fsyncAsync(this.fd);
    } finally {
      closeSync(this.fd);
    }
    renameSync(this.tmpPath, join(this.dir, this.pack));
    syncDirectory(this.dir);
  }

  async abort(): Promise<void> {
    await this.drained().catch(() => {});
    await this.syncing;
    if (!this.closed) closeSync(this.fd);
    this.closed = true;
    rmSync(this.tmpPath, { force: true });
  }

  /** The previous buffer's write done (its failure thrown); `spare` is free again. */
  private async drained(): Promise<void> {
    await this.writing;
    if (this.failure !== undefined) throw this.failure;
  }

  private async flush(): Promise<void> {
    if (this.buffered === 0) return;
    await this.drained();
    await this.room?.(this.buffered);
    const bytes = this.current.subarray(0, this.buffered);
    const position = this.flushed;
    [this.current, this.spare] = [this.spare, this.current];
    this.flushed += this.buffered;
    this.buffered = 0;
    // Failures are kept and thrown by the next call that waits: a rejection nobody awaits yet must not go unhandled.
    this.writing = writeAllAsync(this.fd, bytes, position).catch((e) => void (this.failure ??= e));
    if (this.flushed - this.syncedAt >= SYNC_EVERY) {
      this.syncedAt = this.flushed;
      const previous = this.syncing;
      this.syncing = previous.then(() => fdatasyncAsync(this.fd)).catch((e) => void (this.failure ??= e));
    }
  }
}

export class CheckpointPacks {
  private readonly packsDir: string;
  private readonly manifestsDir: string;
  /** Of each manifest this store saved or loaded (by object: entries are never mutated): its whole base, or itself. */
  private readonly stored = new WeakMap<TreeManifest, { whole: { id: string; tree: TreeManifest } }>();
  /**
   * The manifests last saved or loaded, by id, the newest last: a view's checkpoint loads the tree it was brought to,
   * most often the one its previous checkpoint just saved (megabytes of JSON for 10,000 files, parsed again).
   */
  private readonly recent = new Map<string, TreeManifest>();

  /** `room`: asked before each buffer of a pack is written, with its size (the data directory's reserve). */
  constructor(
    root: string,
    private readonly room?: Room,
  ) {
    this.packsDir = join(root, 'packs');
    this.manifestsDir = join(root, 'manifests');
    mkdirSync(this.packsDir, { recursive: true, mode: 0o700 });
    mkdirSync(this.manifestsDir, { recursive: true, mode: 0o700 });
  }

  async writer(): Promise<FinishablePackWriter> {
    return new PackFile(this.packsDir, this.room);
  }

  /**
   * Reads blobs of finished packs, one at a time; a chunk is valid until the next one is asked for (one buffer,
   * reused). The pack last read stays open until the event loop turns, so consecutive blobs of one pack (a whole
   * tree) cost no open each.
   */
  source(): BlobSource {
    const packsDir = this.packsDir;
    const buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
    let held: { pack: string; fd: number } | undefined;
    let reading = 0;
    let closeScheduled = false;
    const release = (): void => {
      if (held && reading === 0) closeSync(held.fd);
      if (reading === 0) held = undefined;
    };
    const packFd = (pack: string): number => {
      if (held?.pack === pack) return held.fd;
      let fd: number;
      try {
        fd = openSync(join(packsDir, pack), constants.O_RDONLY);
      } catch (e) {
        if (errorCode(e) === 'ENOENT') throw new BerthError('not_found', 'A checkpoint pack is missing.', { pack });
        throw e;
      }
      // Held only when no other read is under way (one might be using the pack held now); else closed after this read.
      if (reading === 1) {
        if (held) closeSync(held.fd);
        held = { pack, fd };
      }
      return fd;
    };
    function* chunks(location: BlobLocation, size: number): Generator<Buffer> {
      if (size === 0) return; // an empty blob may name a pack that was never kept (nothing was written to it)
      if (!PACK_NAME.test(location.pack) || !Number.isSafeInteger(location.offset) || location.offset < 0) {
        throw new BerthError('invalid_request', 'A blob location names no pack of this store.', { pack: location.pack, offset: location.offset });
      }
      reading++;
      let fd: number | undefined;
      try {
        fd = packFd(location.pack);
        for (let done = 0; done < size; ) {
          const read = readSync(fd, buffer, 0, Math.min(buffer.length, size - done), location.offset + done);
          if (read === 0) throw new BerthError('internal', 'A checkpoint pack ends before the blob it should hold.', { pack: location.pack, offset: location.offset, size });
          done += read;
          yield buffer.subarray(0, read);
        }
      } finally {
        reading--;
        if (fd !== undefined && held?.fd !== fd) closeSync(fd);
        if (!closeScheduled) {
          closeScheduled = true;
          setImmediate(() => {
            closeScheduled = false;
            release();
          });
        }
      }
    }
    return {
      async *read(location, size) {
        yield* chunks(location, size);
      },
      readSync(location, size, use) {
        for (const chunk of chunks(location, size)) use(chunk);
      },
    };
  }

  /**
   * Stores the manifest durably and returns its checkpoint id (the sha256 of what is stored: the same tree stored the
   * same way gives the same id). When `previous` is a manifest this store saved or loaded, what is stored may be the
   * changes from its whole base (manifest-delta.ts).
   */
  async saveManifest(manifest: TreeManifest, previous?: TreeManifest): Promise<string> {
    const whole = previous && this.stored.get(previous)?.whole;
    const delta = whole && deltaOf(whole.id, whole.tree, manifest);
    const json = Buffer.from(JSON.stringify(delta ?? manifest));
    const hex = createHash('sha256').update(json).digest('hex');
    const id = `sha256:${hex}`;
    const path = join(this.manifestsDir, `${hex}.json`);
    if (!existsSync(path)) this.write(path, hex, json);
    // Known as stored only once durable: a later delta never names a base that is not on disk.
    this.stored.set(manifest, { whole: delta ? whole : { id, tree: manifest } });
    this.remember(id, manifest);
    return id;
  }

  /** `json` at `path`, durably: written under a temporary name, fsynced, renamed, the directory fsynced. */
  private write(path: string, hex: string, json: Buffer): void {
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
  }

  /** The manifest of checkpoint `id` (shared with other callers: never mutated). */
  async loadManifest(id: string): Promise<TreeManifest> {
    const cached = this.recent.get(id);
    if (cached) return this.remember(id, cached);
    const stored = this.read(id);
    if (!isDelta(stored)) {
      this.stored.set(stored, { whole: { id, tree: stored } });
      return this.remember(id, stored);
    }
    const cachedBase = this.recent.get(stored.base);
    const base = cachedBase && this.stored.get(cachedBase)?.whole.id === stored.base ? cachedBase : this.read(stored.base);
    if (isDelta(base)) throw new BerthError('internal', 'A stored checkpoint manifest builds on another that is not whole.', { checkpoint: id, base: stored.base });
    this.stored.set(base, { whole: { id: stored.base, tree: base } });
    const tree = applyDelta(base, stored);
    this.stored.set(tree, { whole: { id: stored.base, tree: base } });
    return this.remember(id, tree);
  }

  private remember(id: string, manifest: TreeManifest): TreeManifest {
    this.recent.delete(id);
    this.recent.set(id, manifest);
    let entries = 0;
    for (const kept of this.recent.values()) entries += kept.entries.length;
    for (const [oldest, kept] of this.recent) {
      if (this.recent.size <= RECENT_MANIFESTS && entries <= RECENT_ENTRIES) break;
      this.recent.delete(oldest);
      entries -= kept.entries.length;
    }
    return manifest;
  }

  /** The stored form of checkpoint `id`, checked against it. */
  private read(id: string): TreeManifest | ManifestDelta {
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
    return JSON.parse(json.toString()) as TreeManifest | ManifestDelta;
  }
}
