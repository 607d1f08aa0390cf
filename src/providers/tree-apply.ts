/**
 * Apply of a checkpoint tree to a view that a hostile command may change at the same time: every directory is reached
 * from the view's root descriptor one component at a time without following (spool-dir.ts); a link or file planted
 * where the tree has a directory is replaced by a directory, never entered; a file is written under a fresh name
 * (O_EXCL, O_NOFOLLOW) and renamed over its entry, so what sat there (a link, a directory) is replaced, not written
 * through. Only the changes from base to target are made.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, constants, fchmodSync, fchownSync, lchownSync, openSync, readdirSync, renameSync, symlinkSync, writeSync } from 'node:fs';
import { BerthError } from '../../schemas/errors.ts';
import { EventLoopSlices } from './event-loop-slices.ts';
import { PRIVATE_ROOT_NAMES, type BlobSource, type FileOwner, type TreeEntry, type TreeManifest } from './file-host.ts';
import { at, errorCode, mkdirAt, removeEntryAt, removeTreeAt } from './spool-dir.ts';
import { checkManifest } from './tree-manifest-check.ts';
import { comparePaths, diffTrees } from './tree-diff.ts';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;
const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
const CREATE_FLAGS = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK;
/** A name keeps being taken (by a command racing the apply) this many times: the apply gives up. */
const MAX_ATTEMPTS = 4;

const raced = (path: string): BerthError =>
  new BerthError('internal', 'An entry of the view keeps changing while the checkpoint is applied; stopped.', { path });

/** The target's entry at `path` (entries are checked sorted): a lookup per change, not a map of the whole tree. */
function entryAt(target: TreeManifest, path: string): TreeEntry | undefined {
  const { entries } = target;
  for (let low = 0, high = entries.length - 1; low <= high; ) {
    const middle = (low + high) >>> 1;
    const order = comparePaths(entries[middle]!.path, path);
    if (order === 0) return entries[middle];
    if (order < 0) low = middle + 1;
    else high = middle - 1;
  }
  return undefined;
}

/** The open directories of the path being worked in, from the root down: consecutive entries share their parents. */
class DirectoryChain {
  private readonly chain: { name: string; fd: number }[] = [];

  constructor(
    private readonly rootFd: number,
    private readonly target: TreeManifest,
    private readonly owner: FileOwner,
  ) {}

  /**
   * The directory `segments` open; with `make`, each component missing, or not a directory (a planted link or file:
   * removed, never followed), is made as the tree describes it. Without `make`, undefined when any is not a directory.
   */
  open(segments: string[], make: boolean): number | undefined {
    let common = 0;
    while (common < this.chain.length && common < segments.length && this.chain[common]!.name === segments[common]) common++;
    this.closeFrom(common);
    for (let i = common; i < segments.length; i++) {
      const parent = i === 0 ? this.rootFd : this.chain[i - 1]!.fd;
      const fd = this.enter(parent, segments[i]!, segments.slice(0, i + 1).join('/'), make);
      if (fd === undefined) return undefined;
      this.chain.push({ name: segments[i]!, fd });
    }
    return segments.length === 0 ? this.rootFd : this.chain[segments.length - 1]!.fd;
  }

  closeFrom(depth: number): void {
    while (this.chain.length > depth) closeSync(this.chain.pop()!.fd);
  }

  private enter(parent: number, name: string, path: string, make: boolean): number | undefined {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      try {
        return openSync(at(parent, name), DIR_FLAGS);
      } catch (e) {
        const code = errorCode(e);
        if (code !== 'ENOENT' && code !== 'ELOOP' && code !== 'ENOTDIR') throw e;
        if (!make) return undefined;
        if (code !== 'ENOENT') removeEntryAt(parent, name);
      }
      if (mkdirAt(parent, name, 0o700)) {
        const fd = openSync(at(parent, name), DIR_FLAGS);
        fchownSync(fd, this.owner.uid, this.owner.gid);
        const entry = entryAt(this.target, path);
        fchmodSync(fd, entry?.type === 'directory' ? entry.mode : 0o755);
        return fd;
      }
    }
    throw raced(path);
  }
}

/** Makes the view open as `rootFd` go from `base` (undefined: nothing known) to `target`. */
export async function applyTree(rootFd: number, owner: FileOwner, target: TreeManifest, base: TreeManifest | undefined, source: BlobSource): Promise<void> {
  checkManifest(target);
  if (base) checkManifest(base);
  const changes = diffTrees(base, target);
  const dirs = new DirectoryChain(rootFd, target, owner);
  const writer = new EntryWriter(owner, source, base === undefined && isEmptyView(rootFd));
  const slices = new EventLoopSlices();
  try {
    // Removals first, deepest first: names are freed before anything is written, and a directory is emptied of what
    // the tree knows before it goes (whatever else it holds goes with it: the target has no such directory).
    for (let i = changes.length - 1; i >= 0; i--) {
      const change = changes[i]!;
      if (change.after !== null) continue;
      const segments = change.path.split('/');
      const parent = dirs.open(segments.slice(0, -1), false);
      if (parent !== undefined) removeEntryAt(parent, segments[segments.length - 1]!);
      const pause = slices.breathe();
      if (pause) await pause;
    }
    for (const change of changes) {
      if (change.after === null) continue;
      const entry = entryAt(target, change.path)!;
      const segments = change.path.split('/');
      if (entry.type === 'directory') {
        const fd = dirs.open(segments, true)!;
        fchownSync(fd, owner.uid, owner.gid);
        fchmodSync(fd, entry.mode);
      } else {
        const parent = dirs.open(segments.slice(0, -1), true)!;
        const writing = writer.write(parent, segments[segments.length - 1]!, entry);
        if (writing) await writing;
      }
      const pause = slices.breathe();
      if (pause) await pause;
    }
  } finally {
    dirs.closeFrom(0);
  }
}

function isEmptyView(rootFd: number): boolean {
  return readdirSync(at(rootFd, '.')).every((name) => (PRIVATE_ROOT_NAMES as readonly string[]).includes(name));
}

/** Writes files and links into a directory held open, each under a fresh name renamed over the entry. */
class EntryWriter {
  private readonly tmpPrefix = `.berth-apply-${randomBytes(6).toString('hex')}-`;
  private made = 0;
  /** The file a synchronous source is copying into, and its bytes so far (no closure per file: see make). */
  private fd = -1;
  private written = 0;
  private readonly put = (chunk: Buffer): void => {
    writeAll(this.fd, chunk);
    this.written += chunk.length;
  };

  /** `fresh`: the view was empty, so a file may be created at its name directly (O_EXCL still refuses a planted one). */
  constructor(
    private readonly owner: FileOwner,
    private readonly source: BlobSource,
    private readonly fresh: boolean,
  ) {}

  /** Writes the entry at `name`; a promise only when its bytes come from an asynchronous source. */
  write(dirFd: number, name: string, entry: TreeEntry): Promise<void> | void {
    if (this.fresh) {
      const made = this.make(dirFd, name, entry);
      if (made !== false) return made === true ? undefined : made;
    }
    return this.replace(dirFd, name, entry, 0);
  }

  private replace(dirFd: number, name: string, entry: TreeEntry, attempt: number): Promise<void> | void {
    if (attempt === MAX_ATTEMPTS) throw raced(entry.path);
    const tmp = `${this.tmpPrefix}${this.made++}`;
    const made = this.make(dirFd, tmp, entry);
    if (made === false) return this.replace(dirFd, name, entry, attempt + 1);
    if (made === true) return renameOver(dirFd, tmp, name);
    return made.then(() => renameOver(dirFd, tmp, name));
  }

  // No closure is made per file below: an apply writes thousands, and each function made costs (tsx names them).

  /** Creates `name` as the entry: false when the name is taken, true when done, a promise while bytes still come. */
  private make(dirFd: number, name: string, entry: TreeEntry): boolean | Promise<void> {
    if (entry.type === 'symlink') {
      try {
        symlinkSync(entry.target!, at(dirFd, name));
      } catch (e) {
        if (errorCode(e) === 'EEXIST') return false;
        throw e;
      }
      lchownSync(at(dirFd, name), this.owner.uid, this.owner.gid);
      return true;
    }
    let fd: number;
    try {
      fd = openSync(at(dirFd, name), CREATE_FLAGS, 0o600);
    } catch (e) {
      if (errorCode(e) === 'EEXIST') return false;
      throw e;
    }
    try {
      if (entry.size > 0 && !this.source.readSync) {
        return this.stream(fd, entry).then(
          () => this.settle(dirFd, name, fd, entry),
          (e: unknown) => this.abandon(dirFd, name, fd, e),
        );
      }
      if (entry.size > 0) {
        this.fd = fd;
        this.written = 0;
        this.source.readSync!(entry.blob!, entry.size, this.put);
        checkSize(entry, this.written);
      }
    } catch (e) {
      this.abandon(dirFd, name, fd, e);
    }
    this.settle(dirFd, name, fd, entry);
    return true;
  }

  private async stream(fd: number, entry: TreeEntry): Promise<void> {
    let written = 0;
    for await (const chunk of this.source.read(entry.blob!, entry.size)) {
      writeAll(fd, chunk);
      written += chunk.length;
    }
    checkSize(entry, written);
  }

  private settle(dirFd: number, name: string, fd: number, entry: TreeEntry): void {
    try {
      fchownSync(fd, this.owner.uid, this.owner.gid);
      fchmodSync(fd, entry.mode);
    } catch (e) {
      this.abandon(dirFd, name, fd, e);
    }
    closeSync(fd);
  }

  private abandon(dirFd: number, name: string, fd: number, e: unknown): never {
    closeSync(fd);
    removeEntryAt(dirFd, name);
    throw e;
  }
}

function writeAll(fd: number, chunk: Buffer): void {
  for (let done = 0; done < chunk.length; ) done += writeSync(fd, chunk, done, chunk.length - done);
}

/**
 * The blob's bytes were as many as the entry names: a pack cut short never becomes a shorter file silently. The
 * hash is not computed again (it would cost as much as the write): packs are the store's own fsynced files.
 */
function checkSize(entry: TreeEntry, written: number): void {
  if (written === entry.size) return;
  throw new BerthError('internal', 'A checkpoint blob does not hold as many bytes as its manifest names; the file was not written.', {
    path: entry.path,
    expected: entry.size,
    found: written,
  });
}

/** The temporary `from` renamed over `to`, or removed when that fails. */
function renameOver(dirFd: number, from: string, to: string): void {
  try {
    renameAt(dirFd, from, to);
  } catch (e) {
    removeEntryAt(dirFd, from);
    throw e;
  }
}

/** rename(2) of `from` over `to` in `dirFd`: a link at `to` is replaced itself; a directory in the way is removed first. */
function renameAt(dirFd: number, from: string, to: string): void {
  try {
    renameSync(at(dirFd, from), at(dirFd, to));
  } catch (e) {
    const code = errorCode(e);
    if (code !== 'EISDIR' && code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOTDIR') throw e;
    removeTreeAt(dirFd, to);
    renameSync(at(dirFd, from), at(dirFd, to));
  }
}
