/**
 * Capture of a view into a checkpoint tree, confined to the view while a hostile command may change it: every entry
 * is reached from a descriptor of its directory (spool-dir.ts), never through a link; files are read from a
 * descriptor opened O_NOFOLLOW|O_NONBLOCK whose fstat says it is a regular file, so a FIFO never blocks and a link or
 * a swapped directory never yields bytes from outside. A file whose stat hint is unchanged since the previous
 * capture is not read again. Synchronous calls in a tight loop, the event loop given back every few milliseconds.
 */
import { createHash } from 'node:crypto';
import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readlinkSync, readSync, type BigIntStats, type Stats } from 'node:fs';
import { BerthError } from '../../schemas/errors.ts';
import { PRIVATE_ROOT_NAMES, type BlobLocation, type CaptureLimits, type PackWriter, type TreeEntry, type TreeManifest } from './file-host.ts';
import { EventLoopSlices } from './event-loop-slices.ts';
import { ctimeWillMove } from './ctime-grain.ts';
import { at, errorCode } from './spool-dir.ts';
import { comparePaths } from './tree-diff.ts';

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = constants;

/** Deeper than this the view is refused (quota_exceeded, checkpoint_depth): each level holds a descriptor open. */
export const MAX_CAPTURE_DEPTH = 256;
/** Longest symlink target recorded (Linux's own bound is 4095). */
export const MAX_LINK_TARGET = 4096;
const READ_BUFFER_BYTES = 1 << 20;

const privateAtRoot = new Set<string>(PRIVATE_ROOT_NAMES);

const hintOf = (s: BigIntStats): string => `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;

type HintStat = Pick<BigIntStats, 'dev' | 'ino' | 'size' | 'mtimeNs' | 'ctimeNs'>;
/**
 * The numbers of an entry's hint, on the entry itself under a symbol (not enumerable: never serialised, never
 * compared), so a check compares numbers instead of making a string of five bigints per file.
 */
const HINT = Symbol('hint numbers');
type Hinted = TreeEntry & { [HINT]?: HintStat | null };

function setHintStat(entry: TreeEntry, hint: HintStat | null): void {
  Object.defineProperty(entry, HINT, { value: hint });
}

/** The numbers of the entry's hint, read once from its string (a manifest is data: a malformed hint matches nothing). */
function hintStatOf(entry: Hinted, hint: string): HintStat | undefined {
  const known = entry[HINT];
  if (known !== undefined) return known ?? undefined;
  const parts = hint.split(':');
  if (parts.length !== 5 || !parts.every((part) => /^[0-9]{1,20}$/.test(part))) {
    setHintStat(entry, null);
    return undefined;
  }
  const [dev, ino, size, mtimeNs, ctimeNs] = parts.map(BigInt) as [bigint, bigint, bigint, bigint, bigint];
  const parsed = { dev, ino, size, mtimeNs, ctimeNs };
  setHintStat(entry, parsed);
  return parsed;
}

const quota = (which: 'checkpoint_entries' | 'checkpoint_bytes' | 'checkpoint_depth', limit: number, use: number): BerthError =>
  new BerthError('quota_exceeded', `The view is over the checkpoint limit (${which}: ${use} past ${limit}); nothing was recorded.`, { quota: which, limit, use });

type Kind = 'file' | 'directory' | 'symlink' | 'special' | 'unknown';

type Typed = Pick<Stats, 'isFile' | 'isDirectory' | 'isSymbolicLink' | 'isFIFO' | 'isSocket' | 'isCharacterDevice' | 'isBlockDevice'>;

const kindOf = (entry: Typed): Kind =>
  entry.isFile() ? 'file' : entry.isDirectory() ? 'directory' : entry.isSymbolicLink() ? 'symlink' : entry.isFIFO() || entry.isSocket() || entry.isCharacterDevice() || entry.isBlockDevice() ? 'special' : 'unknown';

/**
 * The directory's entries with the type readdir gives (d_type: no lstat needed to tell a link from a file).
 * Names that cannot be recorded faithfully as a JSON string (not UTF-8) are left out: a U+FFFD marks a lossy decode.
 */
function listing(dirFd: number): { entries: { name: string; kind: Kind }[]; unreadable: number } {
  const dirents = readdirSync(at(dirFd, '.'), { withFileTypes: true });
  const entries = dirents.map((dirent) => ({ name: dirent.name, kind: kindOf(dirent) }));
  if (!entries.some((entry) => entry.name.includes('\uFFFD'))) return { entries, unreadable: 0 };
  const raw = readdirSync(at(dirFd, '.'), { encoding: 'buffer', withFileTypes: true });
  const kept = raw.filter((dirent) => Buffer.from(dirent.name.toString()).equals(dirent.name)).map((dirent) => ({ name: dirent.name.toString(), kind: kindOf(dirent) }));
  return { entries: kept, unreadable: raw.length - kept.length };
}

/** The directory at `dir` under the root, each step opened without following a link; undefined if any step is not one. */
function openBeneath(rootFd: number, dir: string): number | undefined {
  let fd = rootFd;
  for (const name of dir.split('/')) {
    let next: number | undefined;
    try {
      next = openSync(at(fd, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    } catch {
      next = undefined;
    }
    if (fd !== rootFd) closeSync(fd);
    if (next === undefined) return undefined;
    fd = next;
  }
  return fd;
}

/** Two lists sorted by path, with no path in both, as one sorted list. */
function mergeSorted(a: TreeEntry[], b: TreeEntry[]): TreeEntry[] {
  const out: TreeEntry[] = [];
  let j = 0;
  for (const entry of a) {
    while (j < b.length && comparePaths(b[j]!.path, entry.path) < 0) out.push(b[j++]!);
    out.push(entry);
  }
  while (j < b.length) out.push(b[j++]!);
  return out;
}

export class TreeCapture {
  private readonly entries: TreeEntry[] = [];
  private readonly previousByPath = new Map<string, TreeEntry>();
  /** Blobs by hash, of the previous capture and of this one: made at the first file read (most captures read few). */
  private knownBlobs: Map<string, BlobLocation> | undefined;
  private readonly buffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  private seen = 0;
  private files = 0;
  private bytes = 0;
  private skipped = 0;
  private readonly slices = new EventLoopSlices();
  private takenAtNs = 0n;
  /** A file with more than one link was seen: a change through another name would not name this path (tree-watch.ts). */
  linked = false;

  /**
   * `rootPath`: the view's own path (canonical, the host's above it), for the stat-hint checks; without it they go
   * through the directory's descriptor like everything else.
   */
  constructor(
    previous: TreeManifest | undefined,
    private readonly pack: PackWriter,
    private readonly limits: CaptureLimits,
    private readonly rootPath?: string,
    private readonly watch?: { watchDir(dirFd: number, dir: string): void },
  ) {
    for (const entry of previous?.entries ?? []) this.previousByPath.set(entry.path, entry);
  }

  /** The tree under the directory open as `rootFd`. */
  async run(rootFd: number): Promise<TreeManifest> {
    await this.walk(rootFd, '', 1);
    const entries = this.entries;
    if (entries.some((entry, i) => i > 0 && comparePaths(entries[i - 1]!.path, entry.path) > 0)) entries.sort((a, b) => comparePaths(a.path, b.path));
    return { version: 1, entries, files: this.files, bytes: this.bytes, skipped: this.skipped };
  }

  /**
   * The tree as the previous capture had it with the `changed` paths looked at again (tree-watch.ts says nothing else
   * changed), or undefined when a full walk is needed: a directory among them or above them changed, one is now
   * neither file nor link, the previous capture skipped entries (which it does not name), or a file has another link.
   */
  async runChanged(rootFd: number, previous: TreeManifest, changed: Iterable<string>): Promise<TreeManifest | undefined> {
    if (previous.skipped > 0) return undefined;
    const looked = new Set<string>();
    for (const path of changed) {
      const slash = path.lastIndexOf('/');
      const dir = slash < 0 ? '' : path.slice(0, slash);
      const name = path.slice(slash + 1);
      if (dir === '' && privateAtRoot.has(name)) continue;
      if ((dir !== '' && this.previousByPath.get(dir)?.type !== 'directory') || this.previousByPath.get(path)?.type === 'directory') return undefined;
      looked.add(path);
      const dirFd = dir === '' ? rootFd : openBeneath(rootFd, dir);
      if (dirFd === undefined) return undefined;
      try {
        const stats = lstatSync(at(dirFd, name), { bigint: true, throwIfNoEntry: false });
        if (!stats) continue; // removed: left out below
        const kind = kindOf(stats);
        if (kind !== 'file' && kind !== 'symlink') return undefined;
        this.takenAtNs = BigInt(Date.now()) * 1_000_000n;
        await this.entry(dirFd, name, path, kind, dir === '' ? 1 : dir.split('/').length + 1);
      } finally {
        if (dirFd !== rootFd) closeSync(dirFd);
      }
      if (this.linked || this.entries.some((entry) => entry.type === 'directory')) return undefined;
    }
    this.entries.sort((a, b) => comparePaths(a.path, b.path));
    const entries = mergeSorted(previous.entries.filter((entry) => !looked.has(entry.path)), this.entries);
    this.count(entries.length);
    for (const entry of entries) {
      if (entry.type !== 'file' || looked.has(entry.path)) continue;
      this.files++;
      this.addBytes(entry.size);
    }
    return { version: 1, entries, files: this.files, bytes: this.bytes, skipped: this.skipped };
  }

  private async walk(dirFd: number, prefix: string, depth: number): Promise<void> {
    if (depth > MAX_CAPTURE_DEPTH) throw quota('checkpoint_depth', MAX_CAPTURE_DEPTH, depth);
    this.watch?.watchDir(dirFd, prefix);
    const { entries, unreadable } = listing(dirFd);
    this.skipped += unreadable;
    this.count(entries.length);
    this.takenAtNs = BigInt(Date.now()) * 1_000_000n;
    for (const { name, kind } of entries) {
      if (prefix === '' && privateAtRoot.has(name)) continue;
      // Most entries (a link, a reused file) need no await: only the ones that read or descend return a promise.
      const pending = this.entry(dirFd, name, prefix === '' ? name : `${prefix}/${name}`, kind, depth);
      if (pending) await pending;
      const pause = this.slices.breathe();
      if (pause) {
        await pause;
        this.takenAtNs = BigInt(Date.now()) * 1_000_000n;
      }
    }
  }

  private count(more: number): void {
    this.seen += more;
    if (this.seen > this.limits.maxEntries) throw quota('checkpoint_entries', this.limits.maxEntries, this.seen);
  }

  /**
   * `listed` is the type readdir gave. A special file is never opened. A file is looked at with lstat only when the
   * previous capture has a hint for its path, and kept as it was when the hint matches; otherwise it is opened
   * straight away (O_NOFOLLOW: a link planted since fails; O_NONBLOCK, O_NOCTTY: a FIFO or terminal planted since
   * neither blocks nor attaches) and fstat of the descriptor decides. A device node planted between the listing and
   * the open would be opened (not read): staging volumes are mounted nodev, and a contained command cannot make
   * device nodes.
   */
  private entry(dirFd: number, name: string, path: string, listed: Kind, depth: number): Promise<void> | void {
    let kind = listed;
    const previous = kind === 'file' ? this.previousByPath.get(path) : undefined;
    if (previous?.type === 'file' && previous.stat !== undefined) {
      if (this.hintHolds(dirFd, name, path, hintStatOf(previous, previous.stat))) return this.reuse(previous);
    } else if (kind === 'unknown') {
      const stats = lstatSync(at(dirFd, name), { bigint: true, throwIfNoEntry: false });
      if (!stats) return; // gone since it was listed
      kind = kindOf(stats);
    }
    if (kind === 'symlink') return this.link(dirFd, name, path);
    if (kind !== 'file' && kind !== 'directory') return void this.skipped++;
    // Opened without following and without blocking; what is used is what fstat of the descriptor says it is.
    let fd: number;
    try {
      fd = openSync(at(dirFd, name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | (kind === 'directory' ? O_DIRECTORY : 0));
    } catch (e) {
      const code = errorCode(e);
      if (code === 'ENOENT') return;
      if (code === 'ELOOP') return this.link(dirFd, name, path); // swapped for a link since it was listed
      if (code === 'ENOTDIR' || code === 'ENXIO') return void this.skipped++;
      throw e;
    }
    return this.opened(fd, path, depth);
  }

  private async opened(fd: number, path: string, depth: number): Promise<void> {
    try {
      const opened = fstatSync(fd, { bigint: true });
      if (opened.isDirectory()) {
        this.entries.push({ path, type: 'directory', mode: Number(opened.mode) & 0o777, size: 0 });
        await this.walk(fd, path, depth + 1);
      } else if (opened.isFile()) {
        await this.file(fd, path, opened);
      } else {
        this.skipped++;
      }
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Whether the entry's lstat is still the hint. With the view's path the lstat goes by path from the root: the
   * descriptor's /proc/self/fd/N costs the kernel three times the lstat itself, the most of an incremental capture.
   * A directory on the way swapped for a link since it was opened may then be followed: the host stats a path the
   * link names, and nothing of it comes back but a mismatch, since the stat is only compared with the hint, whose
   * dev:ino:ctime is the inode the previous capture read at this path, unchanged since (a move or a new link moves
   * the ctime). A mismatch or a missing entry falls back to the descriptor-relative open, as for a file without a
   * hint.
   */
  private hintHolds(dirFd: number, name: string, path: string, hint: HintStat | undefined): boolean {
    if (hint === undefined) return false;
    const stats = lstatSync(this.rootPath === undefined ? at(dirFd, name) : `${this.rootPath}/${path}`, { bigint: true, throwIfNoEntry: false });
    if (stats && stats.nlink > 1n) this.linked = true;
    return (
      stats !== undefined && stats.isFile() && stats.ctimeNs === hint.ctimeNs && stats.mtimeNs === hint.mtimeNs && stats.size === hint.size && stats.ino === hint.ino && stats.dev === hint.dev
    );
  }

  /** The previous entry itself: its ctime did not move, so neither did its mode (entries are never mutated). */
  private reuse(previous: TreeEntry): void {
    this.addBytes(previous.size);
    this.files++;
    this.entries.push(previous);
  }

  private addBytes(size: number): void {
    this.bytes += size;
    if (this.bytes > this.limits.maxBytes) throw quota('checkpoint_bytes', this.limits.maxBytes, this.bytes);
  }

  /** Reads the open file to its end, hashing it while the pack receives it; a known hash takes the bytes back. */
  private async file(fd: number, path: string, stats: BigIntStats): Promise<void> {
    if (stats.nlink > 1n) this.linked = true;
    const start = this.pack.offset;
    const hash = createHash('sha256');
    let size = 0;
    // Read up to the size fstat gave (no read only to meet the end): bytes a writer appends meanwhile change the
    // ctime, so the next capture reads the file again.
    for (const expected = Number(stats.size); size < expected; ) {
      const read = readSync(fd, this.buffer, 0, Math.min(this.buffer.length, expected - size), null);
      if (read === 0) break;
      size += read;
      this.addBytes(read);
      const chunk = this.buffer.subarray(0, read);
      hash.update(chunk);
      await this.pack.write(chunk);
    }
    const digest = `sha256:${hash.digest('hex')}`;
    if (!this.knownBlobs) {
      this.knownBlobs = new Map();
      for (const entry of this.previousByPath.values()) if (entry.type === 'file' && entry.hash && entry.blob) this.knownBlobs.set(entry.hash, entry.blob);
    }
    let blob = this.knownBlobs.get(digest);
    if (blob) {
      await this.pack.truncate(start);
    } else {
      blob = { pack: this.pack.pack, offset: start };
      this.knownBlobs.set(digest, blob);
    }
    this.files++;
    const entry: TreeEntry = { path, type: 'file', mode: Number(stats.mode) & 0o777, size, hash: digest, blob };
    // Only a file read to the size it had when looked at, whose ctime any change since would move, gets a hint: the
    // next capture keeps its bytes while the stats hold (ctime-grain.ts).
    if (BigInt(size) === stats.size && ctimeWillMove(stats, this.takenAtNs)) {
      entry.stat = hintOf(stats);
      setHintStat(entry, { dev: stats.dev, ino: stats.ino, size: stats.size, mtimeNs: stats.mtimeNs, ctimeNs: stats.ctimeNs });
    }
    this.entries.push(entry);
  }

  private link(dirFd: number, name: string, path: string): void {
    let raw: Buffer;
    try {
      raw = readlinkSync(at(dirFd, name), { encoding: 'buffer' });
    } catch (e) {
      // Gone, or no longer a link (EINVAL): changed again while looked at; a later capture sees what it became.
      if (errorCode(e) === 'ENOENT' || errorCode(e) === 'EINVAL') return;
      throw e;
    }
    const target = raw.toString();
    if (raw.length > MAX_LINK_TARGET || !Buffer.from(target).equals(raw)) return void this.skipped++;
    // A link's own mode means nothing on Linux (always 0o777).
    this.entries.push({ path, type: 'symlink', mode: 0o777, size: 0, target });
  }
}
