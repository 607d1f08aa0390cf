/**
 * The file tools of a workspace (read, write, edit, list, stat, mkdir, remove, stage), confined to its root: every
 * path is walked component by component from a descriptor of the root through `/proc/self/fd/<fd>/<name>` (see
 * spool-dir.ts), so no link, even one swapped in during the call, is ever followed, and nothing but regular files
 * with a single link and directories is acted on.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lchownSync, renameSync, rmdirSync, unlinkSync, type Stats } from 'node:fs';
import { close as closeCallback, open as openCallback, rename as renameCallback, unlink as unlinkCallback, write as writeCallback, writev as writevCallback } from 'node:fs';
import { readdir } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { promisify } from 'node:util';
import { BerthError } from '../../../schemas/errors.ts';
import { splitRelativePath } from '../../content/content-path.ts';
import { ctimeWillMove } from '../../providers/ctime-grain.ts';
import { exchangeAt } from '../../providers/exchange-at.ts';
import { hashedWriter } from '../../providers/hashed-write.ts';
import { at, errorCode, lstatAt, mkdirAt, openDir, openDirAt, openEntry, removeTreeAt } from '../../providers/spool-dir.ts';
import { DIRECTORY_STAMP, knownStamp, nowNs, readAsync, rememberStamp, rememberWritten, stampOfFd, stampOfOpenFile, versionOf, type FileStamp } from './file-stamp.ts';
import { wholeFileBudget } from './buffer-budget.ts';
import { CheckedFileStream } from './checked-file-stream.ts';
import { INPUTS_DIR, manifestAt, PRIVATE_DIR, type FileChange } from './workspace-manifest.ts';
import type { Room } from '../../content/room-check.ts';

export { INPUTS_DIR, PRIVATE_DIR, type FileChange, type FileStamp };

export interface EntryInfo {
  name: string;
  path: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  mode: number;
  mtimeMs: number;
}

export interface WorkspaceFilesOptions {
  /** Owner given to every file and directory the tools create (fchown), e.g. the sandbox identity; absent: the root directory's own uid/gid. */
  owner?: { uid: number; gid: number };
  /** Largest file read or written in one call (file_too_large 413 with detail.max_bytes past it). Default 64 MiB. */
  maxFileBytes?: number;
  /** Looked at before each batch of a write goes to disk: throws to stop it (the data directory's reserve). */
  room?: Room;
}

type Owner = { uid: number; gid: number };

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK } = constants;
const writeAsync = promisify(writeCallback);
const writevAsync = promisify(writevCallback);
// Creating and renaming wait for the filesystem's journal (busy with the event store's commits): off the event loop.
const openAsync = promisify(openCallback);
const closeAsync = promisify(closeCallback);
const renameAsync = promisify(renameCallback);
const unlinkAsync = promisify(unlinkCallback);

async function writeAll(fd: number, data: Buffer): Promise<void> {
  for (let done = 0; done < data.length; ) done += (await writeAsync(fd, data, done, data.length - done)).bytesWritten;
}

/** Writes `chunks` in order with as few calls as the kernel allows (a short write goes on from where it stopped). */
async function writeChunks(fd: number, chunks: Uint8Array[]): Promise<void> {
  let rest = chunks;
  while (rest.length > 0) {
    let written = (await writevAsync(fd, rest)).bytesWritten;
    while (rest.length > 0 && written >= rest[0]!.length) {
      written -= rest[0]!.length;
      rest = rest.slice(1);
    }
    if (written > 0) rest = [rest[0]!.subarray(written), ...rest.slice(1)];
  }
}

/** A read's bytes, whole or as a stream from the file, and when the call is over (`done`: the stream has ended). */
export interface StreamedRead {
  body: Buffer | Readable;
  /** Bytes in `body`. */
  length: number;
  size: number;
  version: string;
  offset: number;
  done: Promise<unknown>;
}

/** The bytes of a write: whole in memory, or arriving in chunks (an HTTP body) to be hashed and written as they come. */
export type FileBytes = Buffer | AsyncIterable<Uint8Array>;

/** Chunks of a streamed write gathered into one write call, while the next ones arrive. */
const GATHER_BYTES = 1 << 20;
/** A read at least this long is streamed (readStream); a shorter one costs less read whole. */
const STREAM_FROM_BYTES = 256 * 1024;
const STREAM_CHUNK_BYTES = 1 << 20;
const DEFAULT_MAX_FILE_BYTES = 64 * 1024 * 1024;
const MAX_LIST_LIMIT = 1000;
/** detail.count of old_text_not_unique stops here (see occurrences). */
const MAX_COUNTED_OCCURRENCES = 100;
const VERSION = /^sha256:[0-9a-f]{64}$/;

/** Why a path is refused (beside the spelling problems of content-path.ts), in detail.reason. */
type Refusal = 'symlink' | 'special_file' | 'hard_link' | 'not_a_directory' | 'is_directory';

const refusalMessages: Record<Refusal, string> = {
  symlink: 'The path goes through a symbolic link; links are never followed.',
  special_file: 'The path names something other than a regular file or a directory.',
  hard_link: 'The file has several hard links; the tools do not act on it.',
  not_a_directory: 'A component of the path is not a directory.',
  is_directory: 'The path names a directory.',
};

/** spool-dir.ts describes what it found in words; the tools' refusal reasons are codes. */
const refusalOfKind = (kind: string, expected: 'file' | 'directory'): Refusal | 'missing' => {
  if (kind === 'symbolic link') return 'symlink';
  if (kind === 'file with several links') return 'hard_link';
  if (kind === 'FIFO' || kind === 'special file') return 'special_file';
  if (kind === 'entry that vanished') return 'missing';
  return expected === 'directory' ? 'not_a_directory' : 'is_directory';
};

const invalid = (path: string, reason: string, message: string, more: Record<string, unknown> = {}): BerthError =>
  new BerthError('invalid_request', message, { path, reason, ...more });

const notFound = (path: string, more: Record<string, unknown> = {}): BerthError =>
  new BerthError('not_found', 'No such file or directory in the workspace.', { path, ...more });

/** A path checked for spelling and for the two reserved directories at the root. */
interface ToolPath {
  raw: string;
  segments: string[];
  /** Normalised relative path, '' for the root. */
  rel: string;
}

export class WorkspaceFiles {
  private readonly maxFileBytes: number;
  private rootOwner: Owner | undefined;

  constructor(
    private readonly root: string,
    private readonly options: WorkspaceFilesOptions = {},
  ) {
    this.maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  }

  /** Bytes of a file, bounded by offset/limit; the version is the sha256 of the whole file. */
  async read(path: string, opts: { offset?: number; limit?: number } = {}): Promise<{ data: Buffer; size: number; version: string; offset: number }> {
    const { body, size, version, offset } = await this.reading(path, opts, false);
    return { data: body as Buffer, size, version, offset };
  }

  /**
   * As `read`, for a caller that passes the bytes on (the HTTP tool): a large read comes as a stream from its
   * descriptor, sent as it is read instead of after (a version not remembered is hashed from the descriptor first,
   * one chunk at a time); a small one is read whole as `read` does.
   * `done` settles once the stream has ended or failed (the descriptor is closed then).
   */
  readStream(path: string, opts: { offset?: number; limit?: number } = {}): Promise<StreamedRead> {
    return this.reading(path, opts, true);
  }

  private async reading(path: string, opts: { offset?: number; limit?: number }, mayStream: boolean): Promise<StreamedRead> {
    const offset = this.count(path, 'offset', opts.offset ?? 0);
    const limit = Math.min(this.count(path, 'limit', opts.limit ?? this.maxFileBytes), this.maxFileBytes);
    const target = this.parse(path, 'read');
    if (target.segments.length === 0) throw invalid(path, 'is_directory', refusalMessages.is_directory);
    return this.inParent(target, null, async (dirFd, name) => {
      const fd = this.openFile(dirFd, name, target);
      if (fd === undefined) throw notFound(path);
      let streaming = false;
      try {
        const takenAt = nowNs();
        const stats = fstatSync(fd, { bigint: true });
        const size = Number(stats.size);
        this.checkSize(path, size);
        const known = knownStamp(stats);
        const length = Math.max(0, Math.min(size, offset + limit) - offset);
        const whole = (data: Buffer, stamp: FileStamp, fileSize: number): StreamedRead => ({ body: data, length: data.length, size: fileSize, version: stamp.hash, offset, done: Promise.resolve() });
        // A version not known yet is hashed from the descriptor first, a chunk at a time, never the file whole in
        // memory: a client that takes nothing would hold it there. A change meanwhile moves the stats taken before the
        // hash, so the stream (checked against them) stops short rather than send bytes under that version; where a
        // change might not move them (a coarse ctime, changed moments ago) the file is read whole instead.
        if (mayStream && length >= STREAM_FROM_BYTES && (known || ctimeWillMove(stats, takenAt))) {
          let version = known?.hash;
          if (version === undefined) {
            const stamp = await stampOfFd(fd, undefined, size);
            rememberStamp(stats, takenAt, stamp);
            version = stamp.hash;
          }
          const body = new CheckedFileStream(fd, offset, length, stats, target.rel, STREAM_CHUNK_BYTES);
          streaming = true;
          return { body, length, size, version, offset, done: finished(body) };
        }
        if (offset === 0 && limit >= size) {
          const data = await readWhole(fd, 0, size);
          const stamp = known ?? { size: data.length, hash: versionOf(data) };
          if (!known) rememberStamp(stats, takenAt, stamp);
          return whole(data, stamp, data.length);
        }
        const data = Buffer.allocUnsafe(length);
        if (known) return whole(await readWhole(fd, offset, data.length, data), known, size);
        // A range of a file not hashed yet: the whole file is hashed, one chunk at a time, the range copied on the way.
        let copied = 0;
        const stamp = await stampOfFd(fd, (chunk, chunkOffset) => {
          const from = Math.max(offset, chunkOffset);
          const to = Math.min(offset + data.length, chunkOffset + chunk.length);
          if (to > from) copied += chunk.copy(data, from - offset, from - chunkOffset, to - chunkOffset);
        });
        rememberStamp(stats, takenAt, stamp);
        return whole(data.subarray(0, copied), stamp, stamp.size);
      } finally {
        // A stream closes its descriptor when it ends.
        if (!streaming) closeSync(fd);
      }
    });
  }

  /**
   * Replaces (or creates) a file atomically: a temp file in the same directory, renamed over the name. `ifMatch` is
   * the byte version expected now, or 'absent' for create-only; a mismatch writes nothing (stale_version).
   */
  async write(path: string, data: FileBytes, opts: { ifMatch?: string; parents?: boolean } = {}): Promise<{ version: string; size: number; change: FileChange }> {
    const target = this.parse(path, 'write');
    if (target.segments.length === 0) throw invalid(path, 'is_directory', refusalMessages.is_directory);
    if (Buffer.isBuffer(data)) this.checkSize(path, data.length);
    const ifMatch = this.checkIfMatch(path, opts.ifMatch);
    return this.inParent(target, opts.parents ? [] : null, async (dirFd, name) => {
      const current = await this.currentFile(dirFd, name, target);
      return this.replace(dirFd, name, target, data, current, ifMatch, this.toolOwner());
    });
  }

  /** Replaces the one occurrence of `oldText` with `newText`; none or several is invalid_request (nothing written). */
  async edit(path: string, oldText: string, newText: string, opts: { ifMatch?: string } = {}): Promise<{ version: string; size: number; change: FileChange; replacements: 1 }> {
    const target = this.parse(path, 'write');
    if (target.segments.length === 0) throw invalid(path, 'is_directory', refusalMessages.is_directory);
    if (oldText === '') throw invalid(path, 'old_text_empty', 'The text to replace is empty.');
    const ifMatch = this.checkIfMatch(path, opts.ifMatch);
    return this.inParent(target, null, async (dirFd, name) => {
      const fd = this.openFile(dirFd, name, target);
      if (fd === undefined) throw notFound(path);
      let stats;
      try {
        stats = fstatSync(fd, { bigint: true });
        this.checkSize(path, Number(stats.size));
      } catch (e) {
        closeSync(fd);
        throw e;
      }
      // The file is held twice (as read, and with the text replaced): the process's budget bounds how many at once.
      return wholeFileBudget.holding(2 * Number(stats.size) + Buffer.byteLength(newText), async () => {
        let bytes: Buffer;
        let current: { stamp: FileStamp; mode: number };
        try {
          bytes = await readWhole(fd, 0, Number(stats.size));
          current = { stamp: knownStamp(stats) ?? { size: bytes.length, hash: versionOf(bytes) }, mode: Number(stats.mode) };
        } finally {
          closeSync(fd);
        }
        // Checked before the text is looked for: a stale caller learns that first, whatever it asked to replace.
        this.matchVersion(path, ifMatch, current.stamp.hash);
        const old = Buffer.from(oldText);
        const first = bytes.indexOf(old);
        if (first < 0) throw invalid(path, 'old_text_missing', 'The text to replace does not occur in the file.');
        if (bytes.indexOf(old, first + 1) >= 0) {
          throw invalid(path, 'old_text_not_unique', 'The text to replace occurs more than once; give more context.', { count: occurrences(bytes, old) });
        }
        const next = Buffer.concat([bytes.subarray(0, first), Buffer.from(newText), bytes.subarray(first + old.length)]);
        this.checkSize(path, next.length);
        const done = await this.replace(dirFd, name, target, next, current, undefined, this.toolOwner());
        return { ...done, replacements: 1 as const };
      });
    });
  }

  /** A directory's entries sorted by name, a page at a time; `next` is the cursor of the following page. */
  async list(path: string, opts: { limit?: number; cursor?: string } = {}): Promise<{ entries: EntryInfo[]; next?: string }> {
    const limit = opts.limit ?? MAX_LIST_LIMIT;
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw invalid(path, 'bad_limit', `The limit must be an integer from 1 to ${MAX_LIST_LIMIT}.`, { max: MAX_LIST_LIMIT });
    }
    const after = opts.cursor === undefined ? undefined : decodeCursor(path, opts.cursor);
    const target = this.parse(path, 'read');
    return this.inDirectory(target, async (dirFd) => {
      let names = await readdir(at(dirFd, '.'));
      if (target.segments.length === 0) names = names.filter((name) => name !== PRIVATE_DIR);
      names.sort(byName);
      const rest = after === undefined ? names : names.filter((name) => name > after);
      const page = rest.slice(0, limit);
      const entries: EntryInfo[] = [];
      for (const name of page) {
        const stats = lstatAt(dirFd, name);
        if (stats) entries.push(entryInfo(name, join(target.rel, name), stats));
      }
      return rest.length > limit ? { entries, next: Buffer.from(page[page.length - 1]).toString('base64url') } : { entries };
    });
  }

  /** What the path names, never followed (a link is described as one); a regular file also gets its version. */
  async stat(path: string): Promise<EntryInfo & { version?: string }> {
    const target = this.parse(path, 'read');
    if (target.segments.length === 0) return this.withRoot((rootFd) => entryInfo('', '', fstatSync(rootFd)));
    return this.inParent(target, null, async (dirFd, name) => {
      const stats = lstatAt(dirFd, name);
      if (!stats) throw notFound(path);
      const info = entryInfo(name, target.rel, stats);
      if (!stats.isFile() || stats.nlink !== 1 || stats.size > this.maxFileBytes) return info;
      try {
        const current = await this.currentFile(dirFd, name, target);
        return current ? { ...info, version: current.stamp.hash } : info;
      } catch (e) {
        if (e instanceof BerthError) return info; // swapped for something else since the lstat: described, not read
        throw e;
      }
    });
  }

  async mkdir(path: string, opts: { parents?: boolean } = {}): Promise<{ changes: FileChange[] }> {
    const target = this.parse(path, 'write');
    if (target.segments.length === 0) {
      if (opts.parents) return { changes: [] };
      throw invalid(path, 'exists', 'The path already exists.');
    }
    const changes: FileChange[] = [];
    await this.inParent(target, opts.parents ? changes : null, async (dirFd, name) => {
      if (mkdirAt(dirFd, name)) {
        this.chownAt(dirFd, name, this.toolOwner());
        changes.push(directoryChange(target.rel, 'added'));
        return;
      }
      const stats = lstatAt(dirFd, name);
      if (opts.parents && stats?.isDirectory()) return;
      throw invalid(path, 'exists', 'The path already exists.');
    });
    return { changes };
  }

  /** Removes a file, or a directory (with everything in it only when `recursive`); the root is never removed. */
  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<{ changes: FileChange[] }> {
    const target = this.parse(path, 'write');
    if (target.segments.length === 0) throw invalid(path, 'root', 'The workspace root cannot be removed.');
    return this.inParent(target, null, async (dirFd, name) => {
      const stats = lstatAt(dirFd, name);
      if (!stats) throw notFound(path);
      if (!stats.isDirectory()) {
        const current = await this.currentFile(dirFd, name, target);
        if (!current) throw notFound(path);
        unlinkSync(at(dirFd, name));
        return { changes: [{ path: target.rel, kind: 'file' as const, before: current.stamp, after: null }] };
      }
      try {
        rmdirSync(at(dirFd, name));
        return { changes: [directoryChange(target.rel, 'removed')] };
      } catch (e) {
        if (errorCode(e) === 'ENOENT') throw notFound(path);
        if (errorCode(e) !== 'ENOTEMPTY' && errorCode(e) !== 'EEXIST') throw e;
        if (!opts.recursive) throw invalid(path, 'not_empty', 'The directory is not empty; remove it recursively.');
      }
      return { changes: await this.removeTree(dirFd, name, target) };
    });
  }

  /** Writes a staged input under INPUTS_DIR/<path> (creating the directories), owned by the server: read-only to tools. */
  async stage(path: string, data: FileBytes): Promise<{ version: string; size: number; change: FileChange }> {
    const inner = this.parse(path, 'read');
    if (inner.segments.length === 0) throw invalid(path, 'is_directory', refusalMessages.is_directory);
    if (Buffer.isBuffer(data)) this.checkSize(path, data.length);
    const segments = [INPUTS_DIR, ...inner.segments];
    const target: ToolPath = { raw: path, segments, rel: segments.join('/') };
    return this.inParent(target, [], async (dirFd, name) => {
      const current = await this.currentFile(dirFd, name, target);
      return this.replace(dirFd, name, target, data, current, undefined, null);
    }, null);
  }

  // --- paths and walking ---

  private parse(raw: string, use: 'read' | 'write'): ToolPath {
    const split = splitRelativePath(raw);
    if ('problem' in split) throw invalid(raw, split.problem, `The path is not acceptable (${split.problem}).`);
    const { segments } = split;
    if (segments[0] === PRIVATE_DIR) throw notFound(raw, { reason: 'private_path' });
    if (use === 'write' && segments[0] === INPUTS_DIR) throw invalid(raw, 'read_only_path', 'Staged inputs are read-only to the tools.');
    return { raw, segments, rel: segments.join('/') };
  }

  private async withRoot<T>(use: (rootFd: number) => T | Promise<T>): Promise<T> {
    const rootFd = openDir(this.root);
    if (rootFd === undefined) throw new BerthError('workspace_unavailable', 'The workspace directory is gone.', {});
    try {
      if (!this.options.owner && !this.rootOwner) {
        const { uid, gid } = fstatSync(rootFd);
        this.rootOwner = { uid, gid };
      }
      return await use(rootFd);
    } finally {
      closeSync(rootFd);
    }
  }

  /**
   * Runs `use` with a descriptor of the directory holding the path's last segment. `created`: missing directories
   * on the way are made (and pushed there), owned by `owner`; null: a missing one is not_found.
   */
  private inParent<T>(target: ToolPath, created: FileChange[] | null, use: (dirFd: number, name: string) => Promise<T>, owner?: Owner | null): Promise<T> {
    const parent = target.segments.slice(0, -1);
    return this.withRoot(async (rootFd) => {
      const dirFd = this.walk(rootFd, target, parent.length, created, owner === undefined ? this.toolOwner() : owner);
      try {
        return await use(dirFd, target.segments[target.segments.length - 1]);
      } finally {
        if (dirFd !== rootFd) closeSync(dirFd);
      }
    });
  }

  /** Runs `use` with a descriptor of the directory the whole path names. */
  private inDirectory<T>(target: ToolPath, use: (dirFd: number) => Promise<T>): Promise<T> {
    return this.withRoot(async (rootFd) => {
      const dirFd = this.walk(rootFd, target, target.segments.length, null, null);
      try {
        return await use(dirFd);
      } finally {
        if (dirFd !== rootFd) closeSync(dirFd);
      }
    });
  }

  /** Opens the first `depth` segments one at a time, each in the one before, none followed. */
  private walk(rootFd: number, target: ToolPath, depth: number, created: FileChange[] | null, owner: Owner | null): number {
    let fd = rootFd;
    try {
      for (let i = 0; i < depth; i++) {
        const name = target.segments[i];
        const refuse = (kind: string) => this.refusal(target, i, refusalOfKind(kind, 'directory'));
        let next = openDirAt(fd, name, refuse);
        if (next === undefined && created) {
          if (mkdirAt(fd, name)) {
            this.chownAt(fd, name, owner);
            created.push(directoryChange(target.segments.slice(0, i + 1).join('/'), 'added'));
          }
          next = openDirAt(fd, name, refuse);
        }
        if (next === undefined) throw notFound(target.raw);
        if (fd !== rootFd) closeSync(fd);
        fd = next;
      }
      return fd;
    } catch (e) {
      if (fd !== rootFd) closeSync(fd);
      throw e;
    }
  }

  private refusal(target: ToolPath, index: number, reason: Refusal | 'missing'): BerthError {
    if (reason === 'missing') return notFound(target.raw);
    return invalid(target.raw, reason, refusalMessages[reason], { at: target.segments.slice(0, index + 1).join('/') });
  }

  /** The regular, single-link file `name` opened for reading (type checked on the descriptor); undefined when missing. */
  private openFile(dirFd: number, name: string, target: ToolPath): number | undefined {
    const last = target.segments.length - 1;
    return openEntry(dirFd, name, O_RDONLY, 'file', (kind) => this.refusal(target, last, refusalOfKind(kind, 'file')));
  }

  /** The version and mode of the file there now, or null when there is none. */
  private async currentFile(dirFd: number, name: string, target: ToolPath): Promise<{ stamp: FileStamp; mode: number } | null> {
    const fd = this.openFile(dirFd, name, target);
    if (fd === undefined) return null;
    try {
      const takenAt = nowNs();
      const stats = fstatSync(fd, { bigint: true });
      return { stamp: await stampOfOpenFile(fd, stats, takenAt), mode: Number(stats.mode) };
    } finally {
      closeSync(fd);
    }
  }

  // --- writing ---

  /** Writes `data` to a fresh temp file next to `name` and renames it over `name`: readers see all of it or none. */
  private async replace(
    dirFd: number,
    name: string,
    target: ToolPath,
    data: FileBytes,
    current: { stamp: FileStamp; mode: number } | null,
    ifMatch: string | undefined,
    owner: Owner | null,
  ): Promise<{ version: string; size: number; change: FileChange }> {
    this.matchVersion(target.raw, ifMatch, current?.stamp.hash ?? null);
    const tmp = `.berth-tmp-${randomBytes(8).toString('hex')}`;
    // O_EXCL|O_NOFOLLOW: a name planted meanwhile (a link included) fails the create instead of being written through.
    let fd: number | undefined = await openAsync(at(dirFd, tmp), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK, 0o600);
    let version = '';
    let size = 0;
    try {
      if (Buffer.isBuffer(data)) {
        const writing = writeAll(fd, data);
        // Hashed while the thread pool writes the bytes (the two took turns before: one 4 MiB write, 2-3 ms less).
        version = versionOf(data);
        size = data.length;
        await writing;
      } else {
        ({ version, size } = await this.writeArriving(fd, data, target.raw));
      }
      // The old file's permission bits (never set-id or sticky ones), 0644 for a new file; the umask does not apply.
      fchmodSync(fd, current ? current.mode & 0o777 : 0o644);
      if (owner) fchownSync(fd, owner.uid, owner.gid);
      const written = fstatSync(fd, { bigint: true });
      await this.putUnder(dirFd, tmp, name, current !== null, target);
      // Open until now so the stats after the rename are of the file written, whatever the name holds by then.
      rememberWritten(written, fstatSync(fd, { bigint: true }), { size, hash: version });
      const closing = fd;
      fd = undefined;
      await closeAsync(closing);
    } catch (e) {
      if (fd !== undefined) closeSync(fd);
      unlinkQuietly(dirFd, tmp);
      // A directory swapped in under the name: the rename cannot replace it.
      if (errorCode(e) === 'EISDIR' || errorCode(e) === 'ENOTEMPTY') throw this.refusal(target, target.segments.length - 1, 'is_directory');
      throw e;
    }
    const after = { size, hash: version };
    return { version, size, change: { path: target.rel, kind: 'file', before: current?.stamp ?? null, after } };
  }

  /**
   * Puts the written temp file under `name`. Over a file, the two are swapped and the old one removed: a rename over
   * an existing file makes ext4 write the new bytes out before its next journal commit (auto_da_alloc), which the
   * history commit right after would wait for (5 to 10 ms for 4 MiB on this project's machines); swapped, the bytes
   * reach the disk as those of any file written here do (a command's, a raw writeFile's). Readers see the old file
   * or the new one either way.
   */
  private async putUnder(dirFd: number, tmp: string, name: string, replacing: boolean, target: ToolPath): Promise<void> {
    if (!replacing || !exchangeAt(dirFd, tmp, name)) return renameAsync(at(dirFd, tmp), at(dirFd, name));
    // A directory swapped in under the name meanwhile goes back (a rename could not have replaced it either): swapped
    // again, or renamed back where the name was taken away meanwhile.
    if (lstatAt(dirFd, tmp)?.isDirectory()) {
      for (let tries = 0; tries < 64 && !exchangeAt(dirFd, tmp, name); tries++) {
        try {
          renameSync(at(dirFd, tmp), at(dirFd, name));
          break;
        } catch {
          // the name is back: swap again
        }
      }
      throw this.refusal(target, target.segments.length - 1, 'is_directory');
    }
    await unlinkAsync(at(dirFd, tmp));
  }

  /**
   * Hashes and writes chunks as they arrive, a gathered megabyte per write call while the next arrive: by the last
   * chunk the bytes are written and hashed, where a whole body would be gathered, copied, then hashed and written,
   * and no upload holds more than two megabytes. Past the size limit it stops with file_too_large (the caller drops
   * the temp file).
   */
  private async writeArriving(fd: number, chunks: AsyncIterable<Uint8Array>, path: string): Promise<{ version: string; size: number }> {
    // Hashed on the pool with each batch's write where the addon is built: the event loop only gathers the bytes.
    const pooled = hashedWriter();
    const hash = pooled ? undefined : createHash('sha256');
    const put = (batch: Uint8Array[]) => (pooled ? pooled.write(fd, batch) : writeChunks(fd, batch));
    let size = 0;
    let gathered: Uint8Array[] = [];
    let gatheredBytes = 0;
    const take = () => {
      const batch = gathered;
      gathered = [];
      gatheredBytes = 0;
      return batch;
    };
    let writing: Promise<void> = Promise.resolve();
    try {
      for await (const chunk of chunks) {
        size += chunk.length;
        this.checkSize(path, size);
        hash?.update(chunk);
        gathered.push(chunk);
        gatheredBytes += chunk.length;
        if (gatheredBytes < GATHER_BYTES) continue;
        // One write under way at a time: a disk slower than the network slows the reading, not fills memory.
        await writing;
        await this.options.room?.();
        writing = put(take());
        // Its failure is met at the next await, not reported unhandled while the next chunk is awaited.
        writing.catch(() => undefined);
      }
      await writing;
      await put(take());
    } finally {
      // Nothing under way once the caller closes the descriptor.
      await writing.catch(() => undefined);
    }
    return { version: `sha256:${pooled ? pooled.digest() : hash!.digest('hex')}`, size };
  }

  private checkIfMatch(path: string, ifMatch: string | undefined): string | undefined {
    if (ifMatch !== undefined && ifMatch !== 'absent' && !VERSION.test(ifMatch)) {
      throw invalid(path, 'bad_version', "If-Match must be a byte version ('sha256:<hex>') or 'absent'.");
    }
    return ifMatch;
  }

  private matchVersion(path: string, expected: string | undefined, actual: string | null): void {
    if (expected === undefined || expected === (actual ?? 'absent')) return;
    throw new BerthError('stale_version', 'The file is not at the version named; nothing was written.', { path, expected, actual: actual ?? 'absent' });
  }

  private checkSize(path: string, size: number): void {
    if (size > this.maxFileBytes) {
      throw new BerthError('file_too_large', `The file is over the ${this.maxFileBytes}-byte limit of one call.`, { path, size, max_bytes: this.maxFileBytes });
    }
  }

  private count(path: string, name: string, value: number): number {
    if (!Number.isSafeInteger(value) || value < 0) throw invalid(path, 'bad_range', `The ${name} must be a non-negative integer.`, { [name]: value });
    return value;
  }

  /** The owner of what the tools create: the configured one, else the root's own (read by withRoot, once). */
  private toolOwner(): Owner {
    return this.options.owner ?? this.rootOwner!;
  }

  /** lchown: a directory swapped for a link since it was made gets the link re-owned, never its target. */
  private chownAt(dirFd: number, name: string, owner: Owner | null): void {
    if (owner) lchownSync(at(dirFd, name), owner.uid, owner.gid);
  }

  /** Hashes the tree (the history needs every removed file's version), then removes it without following links. */
  private async removeTree(dirFd: number, name: string, target: ToolPath): Promise<FileChange[]> {
    const treeFd = openDirAt(dirFd, name, (kind) => this.refusal(target, target.segments.length - 1, refusalOfKind(kind, 'directory')));
    if (treeFd === undefined) throw notFound(target.raw);
    let manifest;
    try {
      manifest = await manifestAt(treeFd, target.rel);
    } finally {
      closeSync(treeFd);
    }
    if (manifest.truncated) throw invalid(target.raw, 'tree_too_large', 'The directory is too large or too deep to remove with its history in one call.');
    removeTreeAt(dirFd, name);
    const changes: FileChange[] = Object.entries(manifest.files).map(([path, stamp]) => ({ path, kind: 'file', before: stamp, after: null }));
    for (const path of [target.rel, ...manifest.directories]) changes.push(directoryChange(path, 'removed'));
    return changes.sort((a, b) => byName(a.path, b.path));
  }
}

/** Reads `size` bytes from `offset` into one buffer (fewer when the file shrank meanwhile). */
async function readWhole(fd: number, offset: number, size: number, data = Buffer.allocUnsafe(size)): Promise<Buffer> {
  let done = 0;
  while (done < size) {
    const { bytesRead } = await readAsync(fd, data, done, size - done, offset + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done === size ? data : data.subarray(0, done);
}

/**
 * Occurrences of `text` (overlapping ones too), counted up to MAX_COUNTED_OCCURRENCES: each one found costs the text's
 * length to confirm, so counting every one of a long text repeated through a large file would hold the event loop for hours.
 */
function occurrences(bytes: Buffer, text: Buffer): number {
  let count = 0;
  for (let i = bytes.indexOf(text); i >= 0 && count < MAX_COUNTED_OCCURRENCES; i = bytes.indexOf(text, i + 1)) count++;
  return count;
}

const byName = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const join = (dir: string, name: string): string => (dir === '' ? name : `${dir}/${name}`);

const directoryChange = (path: string, how: 'added' | 'removed'): FileChange =>
  how === 'added' ? { path, kind: 'directory', before: null, after: DIRECTORY_STAMP } : { path, kind: 'directory', before: DIRECTORY_STAMP, after: null };

function entryInfo(name: string, path: string, stats: Stats): EntryInfo {
  const type = stats.isFile() ? 'file' : stats.isDirectory() ? 'directory' : stats.isSymbolicLink() ? 'symlink' : 'other';
  return { name, path, type, size: stats.size, mode: stats.mode & 0o7777, mtimeMs: stats.mtimeMs };
}

function decodeCursor(path: string, cursor: string): string {
  const name = Buffer.from(cursor, 'base64url').toString();
  if (name === '' || Buffer.from(name).toString('base64url') !== cursor) throw invalid(path, 'bad_cursor', 'The cursor is not one this listing gave.');
  return name;
}

function unlinkQuietly(dirFd: number, name: string): void {
  try {
    unlinkSync(at(dirFd, name));
  } catch {
    // renamed already, or never made
  }
}
