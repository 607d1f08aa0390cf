/**
 * An environment's source tree (seed 001 §3): the files the owner puts in, edited one path at a time. Every path is
 * confined to `<env>/source` (content-path.ts). A write streams the body to a temporary file in the environment's
 * staging directory (same filesystem, never inside the source, so a crash leaves no stray file in the next build),
 * syncs it and renames it into place: readers see the old bytes or the new ones, never a prefix. A body over the
 * limit is refused while it streams, and nothing of it stays.
 */
import { randomUUID } from 'node:crypto';
import { constants } from 'node:fs';
import { chmod, lstat, mkdir, open, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { BerthError } from '../../schemas/errors.ts';
import type { ContentLayout } from './content-layout.ts';
import { withContentLock } from './content-lock.ts';
import { contentLimits, type ContentLimits } from './content-limits.ts';
import { resolveContentPath, type ResolvedContentPath } from './content-path.ts';
import { contentTypeOf } from './content-type.ts';
import { removeTree } from './remove-tree.ts';
import type { Body } from './import/byte-reader.ts';
import { RoomCheck, type Room } from './room-check.ts';

export interface TreeEntry {
  path: string;
  type: 'file' | 'directory';
  /** A file's bytes; a directory's: the bytes of every file below it. */
  size: number;
}

export interface TreeListing {
  entries: TreeEntry[];
  files: { count: number; bytes: number };
}

export interface FileRead {
  path: string;
  size: number;
  contentType: string;
  stream: Readable;
}

export class SourceTree {
  readonly dir: string;
  private readonly limits: ContentLimits;

  constructor(
    readonly layout: ContentLayout,
    limits: Partial<ContentLimits> = {},
    /** Looked at as a write's bytes go to disk (room-check.ts). */
    private readonly room?: Room,
  ) {
    this.dir = layout.source;
    this.limits = contentLimits(limits);
  }

  /**
   * Every file and directory, sorted by path, with sizes. A path past the bound (left by an older Berth, which did not
   * bound paths) is not listed: it may lie past PATH_MAX, where it cannot be read; removing an ancestor removes it.
   */
  async tree(): Promise<TreeListing> {
    const entries: TreeEntry[] = [];
    const walk = async (dir: string, rel: string): Promise<number> => {
      let bytes = 0;
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const childRel = rel ? `${rel}/${entry.name}` : entry.name;
        if (Buffer.byteLength(childRel) > this.layout.maxPathBytes) continue;
        const child = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          const item: TreeEntry = { path: childRel, type: 'directory', size: 0 };
          entries.push(item);
          item.size = await walk(child, childRel);
          bytes += item.size;
        } else if (entry.isFile()) {
          const { size } = await lstat(child);
          entries.push({ path: childRel, type: 'file', size });
          bytes += size;
        }
      }
      return bytes;
    };
    try {
      await walk(this.dir, '');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    const files = entries.filter((e) => e.type === 'file');
    return { entries, files: { count: files.length, bytes: files.reduce((sum, e) => sum + e.size, 0) } };
  }

  /** One file's bytes as a stream, opened without following links. */
  async read(rel: string): Promise<FileRead> {
    const target = await this.resolve(rel);
    if (target.existing === null) throw notFound(rel);
    if (target.existing === 'directory') throw invalid(rel, 'is_directory', 'The path names a directory, not a file.');
    const handle = await open(target.abs, constants.O_RDONLY | constants.O_NOFOLLOW);
    const stats = await handle.stat();
    if (!stats.isFile()) {
      await handle.close();
      throw invalid(rel, 'special_file', 'The path names something other than a regular file.');
    }
    return { path: target.rel, size: stats.size, contentType: contentTypeOf(target.rel), stream: handle.createReadStream() };
  }

  /**
   * Write one file from a byte stream, making its directories. `declaredBytes` (a Content-Length) lets an oversized
   * body be refused before any of it is read.
   */
  async write(rel: string, body: Body, options: { declaredBytes?: number } = {}): Promise<{ path: string; size: number }> {
    const max = this.limits.maxFileBytes;
    const first = await this.resolve(rel);
    if (first.existing === 'directory') throw invalid(rel, 'is_directory', 'The path names a directory.');
    if (options.declaredBytes !== undefined && options.declaredBytes > max) throw tooLarge(rel, max);

    await mkdir(this.layout.staging, { recursive: true });
    const tmp = path.join(this.layout.staging, `write-${randomUUID()}`);
    let size = 0;
    const room = new RoomCheck(this.room);
    try {
      const out = await open(tmp, 'wx', 0o644);
      try {
        for await (const chunk of body) {
          size += chunk.byteLength;
          if (size > max) throw tooLarge(rel, max);
          await room.before(chunk.byteLength);
          await out.writeFile(chunk); // writes all of it, from the current position, looping over short writes
        }
        await out.sync();
      } finally {
        await out.close();
      }
      return await withContentLock(this.layout.root, async () => {
        // Resolved again under the lock: the tree may have changed while the body streamed.
        const target = await this.resolve(rel);
        if (target.existing === 'directory') throw invalid(rel, 'is_directory', 'The path names a directory.');
        if (target.existing === 'file') await chmod(tmp, (await lstat(target.abs)).mode & 0o777);
        else await mkdir(path.dirname(target.abs), { recursive: true });
        await rename(tmp, target.abs);
        return { path: target.rel, size };
      });
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** Make a directory and its parents; an existing directory is fine. */
  async mkdir(rel: string): Promise<{ path: string; created: boolean }> {
    return withContentLock(this.layout.root, async () => {
      const target = await this.resolve(rel);
      if (target.existing === 'file') throw invalid(rel, 'is_file', 'The path names a file.');
      if (target.existing === 'directory') return { path: target.rel, created: false };
      await mkdir(target.abs, { recursive: true });
      return { path: target.rel, created: true };
    });
  }

  /** Remove a file or a whole directory tree. It disappears at once (one rename); its bytes are freed after. */
  async remove(rel: string): Promise<{ path: string; type: 'file' | 'directory' }> {
    await mkdir(this.layout.staging, { recursive: true });
    const doomed = path.join(this.layout.staging, `removed-${randomUUID()}`);
    const removed = await withContentLock(this.layout.root, async () => {
      const target = await this.resolve(rel);
      if (target.existing === null) throw notFound(rel);
      await rename(target.abs, doomed);
      return { path: target.rel, type: target.existing };
    });
    await removeTree(doomed);
    return removed;
  }

  private resolve(rel: string): Promise<ResolvedContentPath> {
    return resolveContentPath(this.dir, rel, { maxBytes: this.layout.maxPathBytes });
  }
}

const invalid = (rel: string, reason: string, message: string) => new BerthError('environment_invalid', message, { path: rel, reason });
const notFound = (rel: string) => new BerthError('not_found', 'No file or directory at that path.', { path: rel });
const tooLarge = (rel: string, max: number) =>
  new BerthError('file_too_large', `The file is larger than ${max} bytes.`, { path: rel, max_bytes: max });
