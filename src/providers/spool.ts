/**
 * The host side of the spool protocol that supervisor.sh documents (version 1): parsing its files, turning them into
 * an executor Receipt, reading output by cursor, waiting for changes, the abandon fence and release. Shared by every
 * executor whose spool directory the host can reach; the parsers stand alone for executors that fetch the files
 * some other way.
 */
import { closeSync, fchownSync, fstatSync, mkdirSync, read, readdirSync, readSync, watch, type FSWatcher, type Stats } from 'node:fs';
import { rmdir, unlink } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BerthError } from '../../schemas/errors.ts';
import { outputStreams, type OutputStream } from '../../schemas/output.ts';
import type { HeldFile, OutputChunk, Receipt } from './provider.ts';
import {
  APPEND_FLAGS,
  at,
  createAt,
  FIFO_WRITE_FLAGS,
  lstatAt,
  mkdirAt,
  openDir,
  openDirAt,
  openEntry,
  READ_FLAGS,
  refusedEntry,
  removeEntryAt,
  replaceAt,
} from './spool-dir.ts';
import { spreadSubdirectories } from './spread-dirs.ts';

export const SPOOL_PROTOCOL_VERSION = 1 as const;

/** The supervisor script, to run with `/bin/sh` (native) or to mount read-only into containers. */
export const SUPERVISOR_PATH = fileURLToPath(new URL('./supervisor.sh', import.meta.url));

/** Exit status of `supervisor.sh run` when another claimant (submit or abandon) got the operation first. */
export const SUPERVISOR_CLAIM_LOST = 3;

const OPERATION_ID = /^[A-Za-z0-9_.-]{1,128}$/;

/** A name usable as one spool path component (operation ids; allocation ids for per-allocation spools). */
export const isSpoolName = (name: string): boolean => OPERATION_ID.test(name) && name !== '.' && name !== '..';

export function assertOperationId(operationId: string): void {
  if (!isSpoolName(operationId)) {
    const message = 'An operationId is 1 to 128 characters of A-Z, a-z, 0-9, "_", "." or "-".';
    throw new BerthError('invalid_request', message, { operationId });
  }
}

export type Claim =
  /** `startTime` (clock ticks since boot) where the supervisor could read /proc: with the pid, its identity. */
  | { kind: 'supervisor'; pid: number; startTime?: string }
  | { kind: 'pty'; pid: number; startTime: string }
  | { kind: 'abandoned' }
  /** Created but its content not written yet (or the writer died in between). */
  | { kind: 'pending' };

export interface Started {
  supervisor: number;
  pid: number;
  pgid: number;
  /** The `started` file's mtime. */
  at: string;
}

/** What a receipt line says (see supervisor.sh). */
export interface ReceiptFields {
  /** The sh wait status: an exit code, 128+n for signal n, null when the command never started. */
  status: number | null;
  cancelled: boolean;
  timedOut: boolean;
  error?: string;
}

export type StreamSizes = Record<OutputStream, number>;

/** A receipt as the spool proves it: final, with the agreed final size of every stream. */
export interface FinalReceipt extends ReceiptFields {
  /** The receipt file's mtime. */
  exitedAt: string;
  sizes: StreamSizes;
}

/** The raw files of one operation, read in protocol order (claim, started, receipt). */
export interface SpoolState {
  claim?: Claim;
  started?: Started;
  receipt?: FinalReceipt;
}

export function parseClaim(text: string): Claim {
  const line = text.trim();
  if (line === 'abandoned') return { kind: 'abandoned' };
  const [kind, pid, startTime] = line.split(' ');
  if (kind === 'supervisor' && /^\d+$/.test(pid ?? '')) {
    return { kind: 'supervisor', pid: Number(pid), ...(/^\d+$/.test(startTime ?? '') ? { startTime } : {}) };
  }
  if (kind === 'pty' && /^\d+$/.test(pid ?? '') && startTime) return { kind: 'pty', pid: Number(pid), startTime };
  return { kind: 'pending' };
}

/** A `started` or `receipt` line counts only once complete (newline-terminated JSON). */
function parseLine<T>(text: string): T | undefined {
  if (!text.endsWith('\n')) return undefined;
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}

export function parseStarted(text: string, at: Date): Started | undefined {
  const raw = parseLine<{ supervisor: number; pid: number; pgid: number }>(text);
  return raw && { supervisor: raw.supervisor, pid: raw.pid, pgid: raw.pgid, at: at.toISOString() };
}

export function parseReceiptLine(text: string): ReceiptFields | undefined {
  const raw = parseLine<ReceiptFields & { v: number }>(text);
  if (!raw || raw.v !== SPOOL_PROTOCOL_VERSION) return undefined;
  const { status, cancelled, timedOut, error } = raw;
  return { status, cancelled, timedOut, ...(error ? { error } : {}) };
}

export function receiptLine(r: ReceiptFields): string {
  return `${JSON.stringify({ v: SPOOL_PROTOCOL_VERSION, ...r })}\n`;
}

const signalNames = new Map<number, string>(Object.entries(osConstants.signals).map(([name, n]) => [n, name]));

/** sh reports death by signal n as 128+n. */
export function splitStatus(status: number | null): { exitCode: number | null; signal: string | null } {
  if (status === null) return { exitCode: null, signal: null };
  const signal = status > 128 ? signalNames.get(status - 128) : undefined;
  return signal ? { exitCode: null, signal } : { exitCode: status, signal: null };
}

/**
 * What an operation's files prove. `ownerAlive` says whether the claim's holder still runs (only asked when there
 * is a claim and no receipt); a dead owner with no receipt means the outcome can never be proven: absent.
 */
export function deriveReceipt(operationId: string, state: SpoolState, ownerAlive: boolean, currentSizes?: StreamSizes): Receipt {
  const base = { protocolVersion: SPOOL_PROTOCOL_VERSION, operationId } as const;
  const started = state.started ? { pid: state.started.pid, startedAt: state.started.at } : {};
  if (state.receipt) {
    const r = state.receipt;
    return {
      ...base,
      state: 'exited',
      ...started,
      ...splitStatus(r.status),
      cancelled: r.cancelled,
      timedOut: r.timedOut,
      ...(r.error ? { error: r.error } : {}),
      exitedAt: r.exitedAt,
      sizes: r.sizes,
    };
  }
  if (!state.claim || state.claim.kind === 'abandoned' || !ownerAlive) return { ...base, state: 'absent' };
  return { ...base, state: 'running', ...started, ...(currentSizes ? { sizes: currentSizes } : {}) };
}

const isMissing = (e: unknown): boolean => (e as NodeJS.ErrnoException).code === 'ENOENT';

/** Protocol files hold one short line; anything longer is not one the protocol wrote, and is not read into memory. */
const MAX_SMALL_BYTES = 64 * 1024;

/** A protocol file's text and mtime; undefined when missing; empty text when it is not a regular file or too large. */
function readSmallAt(dirFd: number, name: string): { text: string; mtime: Date } | undefined {
  let fd: number | undefined;
  try {
    fd = openEntry(dirFd, name, READ_FLAGS, 'file', () => UNUSABLE);
  } catch (e) {
    if (e !== UNUSABLE) throw e;
    const stats = lstatAt(dirFd, name);
    return stats && { text: '', mtime: stats.mtime };
  }
  if (fd === undefined) return undefined;
  try {
    const stats = fstatSync(fd);
    if (stats.size > MAX_SMALL_BYTES) return { text: '', mtime: stats.mtime };
    const buffer = Buffer.allocUnsafe(stats.size);
    let got = 0;
    for (let n = -1; got < buffer.length && n !== 0; got += n) n = readSync(fd, buffer, got, buffer.length - got, got);
    return { text: buffer.toString('utf8', 0, got), mtime: stats.mtime };
  } finally {
    closeSync(fd);
  }
}
const UNUSABLE = new Error('not a regular file');
/**
 * An operation directory swapped for a link (or a file) reads as abandoned: its outcome can never be proven, and
 * it can never start (nothing is ever created through it).
 */
const SWAPPED = { text: 'abandoned\n', mtime: new Date(0) };

/** The byte count of an output stream: a regular file's size; anything else (a link, a FIFO, a hard link) holds none. */
function outputSize(dirFd: number, stream: OutputStream): number {
  const stats = lstatAt(dirFd, stream);
  return stats?.isFile() && stats.nlink === 1 ? stats.size : 0;
}

const readAt = (fd: number, buffer: Buffer, offset: number, length: number, position: number): Promise<number> =>
  new Promise((resolve, reject) => read(fd, buffer, offset, length, position, (e, n) => (e ? reject(e) : resolve(n))));

const EMPTY = Buffer.alloc(0);
const MAX_OPEN_OUTPUTS = 64;

/** Keeps `kept` (a descriptor) under `key` in a map of at most `max`, the oldest dropped (with `drop`) first. */
function keepBounded<V>(map: Map<string, V>, key: string, kept: V, max: number, drop: (old: V) => void): void {
  map.set(key, kept);
  for (const [oldest, old] of map) {
    if (map.size <= max) break;
    map.delete(oldest);
    drop(old);
  }
}

const outputKey = (operationId: string, stream: OutputStream): string => `${operationId}/${stream}`;

/** An output descriptor kept open for reads, with the file it holds (to tell whether the entry still names it). */
interface KeptOutput {
  fd: number;
  dev: number;
  ino: number;
}
const MAX_OPEN_DIRS = 16;
export const DEFAULT_READ_BYTES = 1024 * 1024;
/** A file larger than this is unlinked off the event loop (see release). */
const LARGE_UNLINK_BYTES = 16 * 1024 * 1024;
/** Watch events can be lost on some filesystems; waiters look again at least this often. */
const RECHECK_MS = 250;

export interface SpoolOptions {
  /** The user and group the operation directories this spool makes are handed to (the command's, in a container). */
  owner?: { uid: number; gid: number };
}

/**
 * A spool root: one directory per operation. Caches only what never changes (receipts).
 *
 * The command may own its operation directory (a container's UID 1000, a contained command) and swap any entry in it
 * at any moment; so every entry is reached through the operation directory's descriptor, opened without following
 * (spool-dir.ts): nothing the host opens, writes, renames or removes is ever followed out of that directory. Output
 * is read only from regular files; a protocol file that is not one reads as empty. The root's own path is the host's
 * (the data directory, or the volume's root-owned mountpoint), its last component never followed.
 *
 * The protocol files other than the output streams hold a few bytes each, on the local data directory: they are
 * read and written with synchronous calls, which cost microseconds, where a thread-pool round trip per file costs
 * far more on a busy host. Output is read asynchronously.
 */
export class Spool {
  private readonly receipts = new Map<string, FinalReceipt>();
  private readonly fds = new Map<string, KeptOutput>();
  /**
   * Reads under way per output descriptor: one dropped from `fds` meanwhile (replaced, evicted, released) is closed
   * when its last read ends, so a read never meets a closed descriptor, nor one whose number was reused.
   */
  private readonly reading = new Map<number, number>();
  private readonly dirs = new Map<string, number>();
  private rootFd?: number;

  readonly root: string;

  constructor(
    root: string,
    private readonly options: SpoolOptions = {},
  ) {
    this.root = resolve(root);
  }

  /** The operation directory's path: for the supervisor's argv and for naming, never for the host's own opens. */
  dir(operationId: string): string {
    assertOperationId(operationId);
    return join(this.root, operationId);
  }

  file(operationId: string, name: string): string {
    return join(this.dir(operationId), name);
  }

  /** The root's descriptor, opened again when asked `fresh` (the root was removed and made anew). */
  private rootDir(fresh = false): number | undefined {
    if (fresh && this.rootFd !== undefined) {
      closeSync(this.rootFd);
      this.rootFd = undefined;
    }
    if (this.rootFd === undefined) {
      this.rootFd = openDir(this.root);
      // A directory per operation, made and removed at the pace of commands (a root made by an older Berth, too).
      if (this.rootFd !== undefined) spreadSubdirectories(this.rootFd);
    }
    return this.rootFd;
  }

  /** Runs `use` on the root's descriptor; once more on a fresh one when it failed with ENOENT on a removed root. */
  private inRoot<T>(use: (rootFd: number) => T, create = false): T | undefined {
    let root = this.rootDir();
    if (root === undefined && create) {
      mkdirSync(this.root, { recursive: true });
      root = this.rootDir(true);
    }
    if (root === undefined) return undefined;
    try {
      return use(root);
    } catch (e) {
      if (!isMissing(e) || fstatSync(root).nlink > 0) throw e;
      return this.inRoot(use, create);
    }
  }

  /** The operation's directory, opened without following; undefined when missing; a link in its place throws. */
  private openOp(operationId: string): number | undefined {
    assertOperationId(operationId);
    const open = (root: number): number => {
      const fd = openDirAt(root, operationId, (kind) => refusedEntry(operationId, operationId, kind));
      if (fd === undefined) throw Object.assign(new Error('no operation directory'), { code: 'ENOENT' });
      return fd;
    };
    try {
      return this.inRoot(open);
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw e;
    }
  }

  /**
   * Runs `use` on the operation directory's descriptor; undefined when the directory does not exist. A link or file
   * in the directory's place throws `invalid_state`, unless the caller (a read) says what it reads as: `swapped`.
   */
  private inOp<T>(operationId: string, use: (dirFd: number) => T, swapped?: { as: T }): T | undefined {
    let fd: number | undefined;
    try {
      fd = this.opDir(operationId);
    } catch (e) {
      if (swapped && e instanceof BerthError && e.code === 'invalid_state') return swapped.as;
      throw e;
    }
    return fd === undefined ? undefined : use(fd);
  }

  /**
   * The operation directory's descriptor, kept open between calls (opening one through /proc costs more than the
   * read it serves) while the directory it holds is still linked (released elsewhere: opened anew). Held
   * descriptors are used synchronously only, so closing the oldest past a bound never pulls one from under a user.
   */
  private opDir(operationId: string): number | undefined {
    const cached = this.dirs.get(operationId);
    if (cached !== undefined) {
      if (fstatSync(cached).nlink > 0) return cached;
      closeSync(cached);
      this.dirs.delete(operationId);
    }
    const fd = this.openOp(operationId);
    if (fd === undefined) return undefined;
    keepBounded(this.dirs, operationId, fd, MAX_OPEN_DIRS, closeSync);
    return fd;
  }

  private forgetDir(operationId: string): void {
    const fd = this.dirs.get(operationId);
    if (fd !== undefined) closeSync(fd);
    this.dirs.delete(operationId);
  }

  /** The operation's directory, made if missing (with the spool root) and handed to the owner; its descriptor. */
  private ensureOp(operationId: string): { fd: number; made: boolean } {
    assertOperationId(operationId);
    const made = this.inRoot((root) => mkdirAt(root, operationId), true)!;
    const fd = this.openOp(operationId);
    if (fd === undefined) throw new BerthError('internal', 'The operation directory vanished as it was made.', { operationId });
    const owner = this.options.owner;
    if (owner) fchownSync(fd, owner.uid, owner.gid);
    return { fd, made };
  }

  /** mkdir of the operation's directory: true when this call created it, false when it already existed. */
  async create(operationId: string): Promise<boolean> {
    const { fd, made } = this.ensureOp(operationId);
    closeSync(fd);
    return made;
  }

  /** The operation's directory, made if missing (with the spool root); its path. */
  async prepare(operationId: string): Promise<string> {
    closeSync(this.ensureOp(operationId).fd);
    return this.dir(operationId);
  }

  /** O_EXCL create of the file `name` of the operation (its directory made if missing): false when it exists. */
  async createExclusive(operationId: string, name: string, content: string): Promise<boolean> {
    const { fd } = this.ensureOp(operationId);
    try {
      return createAt(fd, name, content);
    } finally {
      closeSync(fd);
    }
  }

  /** O_EXCL create of `claim`: true when this caller owns the operation now. */
  claim(operationId: string, content: string): Promise<boolean> {
    return this.createExclusive(operationId, 'claim', `${content}\n`);
  }

  /** The recovery fence: true when the operation can now never start; false when someone claimed it first. */
  abandon(operationId: string): Promise<boolean> {
    return this.claim(operationId, 'abandoned');
  }

  /** A small file's text (not a regular file: empty); undefined when it or the operation does not exist. */
  async readText(operationId: string, name: string): Promise<string | undefined> {
    return this.inOp(operationId, (dir) => readSmallAt(dir, name)?.text, { as: undefined });
  }

  /** The entry's own status (a link is described, never followed); undefined when missing. */
  async entryStat(operationId: string, name: string): Promise<Stats | undefined> {
    return this.inOp(operationId, (dir) => lstatAt(dir, name), { as: undefined });
  }

  async readClaim(operationId: string): Promise<Claim | undefined> {
    const file = this.inOp(operationId, (dir) => readSmallAt(dir, 'claim'), { as: SWAPPED });
    return file && parseClaim(file.text);
  }

  async readStarted(operationId: string): Promise<Started | undefined> {
    const file = this.inOp(operationId, (dir) => readSmallAt(dir, 'started'), { as: undefined });
    return file && parseStarted(file.text, file.mtime);
  }

  async readReceipt(operationId: string): Promise<FinalReceipt | undefined> {
    return this.receipts.get(operationId) ?? this.inOp(operationId, (dir) => this.receiptAt(operationId, dir), { as: undefined });
  }

  private receiptAt(operationId: string, dir: number): FinalReceipt | undefined {
    const cached = this.receipts.get(operationId);
    if (cached) return cached;
    // Asked on every read of a running command: a missing receipt is told by lstat, not by an open that throws (the
    // error costs more than the read it precedes).
    if (!lstatAt(dir, 'receipt')) return undefined;
    const file = readSmallAt(dir, 'receipt');
    const line = file && parseReceiptLine(file.text);
    if (!line) return undefined;
    const receipt: FinalReceipt = { ...line, exitedAt: file.mtime.toISOString(), sizes: finalSizes(dir) };
    this.receipts.set(operationId, receipt);
    return receipt;
  }

  async readState(operationId: string): Promise<SpoolState> {
    return (
      this.inOp(operationId, (dir): SpoolState => {
        const claimFile = readSmallAt(dir, 'claim');
        if (!claimFile) return {};
        const startedFile = readSmallAt(dir, 'started');
        const started = startedFile && parseStarted(startedFile.text, startedFile.mtime);
        const receipt = this.receiptAt(operationId, dir);
        return { claim: parseClaim(claimFile.text), ...(started ? { started } : {}), ...(receipt ? { receipt } : {}) };
      }, { as: { claim: parseClaim(SWAPPED.text) } }) ?? {}
    );
  }

  /** Host-owned runs (PTY) write their receipt themselves: complete or not at all. */
  async writeReceipt(operationId: string, r: ReceiptFields): Promise<void> {
    const written = this.inOp(operationId, (dir) => {
      replaceAt(dir, 'receipt.tmp', 'receipt', receiptLine(r));
      return true;
    });
    if (written === undefined) throw new BerthError('invalid_state', 'The operation directory is gone: no receipt can be written.', { operationId });
  }

  /** A new file of the host's own (`started` of a PTY run, `spec.json`): false when its name was taken first. */
  async writeNew(operationId: string, name: string, content: string): Promise<boolean> {
    return this.inOp(operationId, (dir) => createAt(dir, name, content)) ?? false;
  }

  /** An empty marker file; one already there (in any form) already marks. */
  async marker(operationId: string, name: 'cancel' | 'timedout'): Promise<void> {
    this.inOp(operationId, (dir) => createAt(dir, name, ''));
  }

  async hasMarker(operationId: string, name: 'cancel' | 'timedout'): Promise<boolean> {
    return this.inOp(operationId, (dir) => lstatAt(dir, name) !== undefined, { as: false }) ?? false;
  }

  /** A descriptor to append to the file `name` of the operation (made if missing): a regular file of one link only. */
  async openAppend(operationId: string, name: OutputStream): Promise<number> {
    const fd = this.inOp(operationId, (dir) => openEntry(dir, name, APPEND_FLAGS, 'file', (kind) => refusedEntry(operationId, name, kind)));
    if (fd === undefined) throw new BerthError('invalid_state', 'The operation directory is gone.', { operationId, file: name });
    return fd;
  }

  /** The write end of the operation's FIFO `name`, non-blocking; undefined when missing; anything but a FIFO throws. */
  openFifo(operationId: string, name: 'stdin'): number | undefined {
    return this.inOp(operationId, (dir) => openEntry(dir, name, FIFO_WRITE_FLAGS, 'fifo', (kind) => refusedEntry(operationId, name, kind)));
  }

  /**
   * The output file of `stream` held open for a copy by path (a worker thread of this process opens `path`, which
   * names this very descriptor); undefined when there is none. Not a regular file: refused.
   */
  async holdOutput(operationId: string, stream: OutputStream): Promise<HeldFile | undefined> {
    const fd = this.inOp(operationId, (dir) => openEntry(dir, stream, READ_FLAGS, 'file', (kind) => refusedEntry(operationId, stream, kind)));
    return fd === undefined ? undefined : { path: `/proc/self/fd/${fd}`, close: () => closeSync(fd) };
  }

  async currentSizes(operationId: string): Promise<StreamSizes> {
    return this.inOp(operationId, sizesAt, { as: undefined }) ?? { stdout: 0, stderr: 0, pty: 0 };
  }

  /**
   * Bytes of `stream` from byte offset `cursor`, at most `maxBytes` (and at most the length of `into`, when the
   * bytes are to land there). `closed` once the receipt exists and the cursor reached the stream's final size; bytes
   * past the final size are never returned. A stream that is not a regular file holds no bytes (its size is 0); one
   * swapped for something else while it is read fails with `invalid_state`.
   */
  async read(
    operationId: string,
    stream: OutputStream,
    cursor: number,
    maxBytes = DEFAULT_READ_BYTES,
    into?: Buffer,
  ): Promise<OutputChunk & { size: number; final: boolean }> {
    if (!Number.isSafeInteger(cursor) || cursor < 0) {
      throw new BerthError('invalid_request', 'A cursor is a byte offset: an integer >= 0.', { cursor });
    }
    // One look at the directory answers both the receipt and the stream's descriptor and size (asked per chunk).
    let receipt = this.receipts.get(operationId);
    let output: { fd: number; size: number } | undefined;
    if (!receipt || receipt.sizes[stream] > cursor) {
      this.inOp(operationId, (dir) => {
        receipt ??= this.receiptAt(operationId, dir);
        if (!receipt || receipt.sizes[stream] > cursor) output = this.outputAt(operationId, stream, dir);
      });
    }
    const final = receipt !== undefined;
    const fd = output?.fd;
    const size = receipt ? receipt.sizes[stream] : (output?.size ?? 0);
    const want = Math.max(0, Math.min(maxBytes, into?.length ?? maxBytes, size - cursor));
    if (fd === undefined || want === 0) {
      return { data: EMPTY, next: cursor, closed: final && cursor >= size, size, final };
    }
    const data = into ? into.subarray(0, want) : Buffer.allocUnsafe(want);
    let got = 0;
    this.reading.set(fd, (this.reading.get(fd) ?? 0) + 1);
    try {
      while (got < want) {
        const bytesRead = await readAt(fd, data, got, want - got, cursor + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
    } finally {
      const left = this.reading.get(fd)! - 1;
      if (left > 0) this.reading.set(fd, left);
      else {
        this.reading.delete(fd);
        // Kept only under its own key: dropped from there meanwhile (replaced, evicted, released), it closes now.
        if (this.fds.get(outputKey(operationId, stream))?.fd !== fd) closeSync(fd);
      }
    }
    const next = cursor + got;
    return { data: got === want ? data : data.subarray(0, got), next, closed: final && next >= size, size, final };
  }

  /**
   * The stream's descriptor and size now. Descriptors stay open between reads (a follower reads many chunks) while
   * the entry still names the file they hold (another instance may have released the operation and it may have run
   * anew); the oldest close past a bound. One lstat per read: the entry's size is the held file's.
   */
  private outputAt(operationId: string, stream: OutputStream, dir: number): { fd: number; size: number } | undefined {
    const key = outputKey(operationId, stream);
    const cached = this.fds.get(key);
    const current = lstatAt(dir, stream);
    if (cached) {
      if (current && current.ino === cached.ino && current.dev === cached.dev) return { fd: cached.fd, size: current.size };
      this.fds.delete(key);
      this.dropFd(cached.fd);
    }
    const fd = current && openEntry(dir, stream, READ_FLAGS, 'file', (kind) => refusedEntry(operationId, stream, kind));
    if (fd === undefined) return undefined;
    const held = fstatSync(fd);
    keepBounded(this.fds, key, { fd, dev: held.dev, ino: held.ino }, MAX_OPEN_OUTPUTS, (old) => this.dropFd(old.fd));
    return { fd, size: held.size };
  }

  private closeOutputs(operationId: string): void {
    for (const stream of outputStreams) {
      const key = outputKey(operationId, stream);
      const kept = this.fds.get(key);
      this.fds.delete(key);
      if (kept) this.dropFd(kept.fd);
    }
  }

  /** Closes an output descriptor no longer kept, now or when the reads under way on it end. */
  private dropFd(fd: number): void {
    if (!this.reading.has(fd)) closeSync(fd);
  }

  /**
   * Resolves with the first defined result of `check`, re-run after every change in the operation's directory (or
   * the spool root while the directory does not exist), every `wake` call, and at least every 250 ms; resolves
   * undefined after `timeoutMs`. The watcher is set up before the first check, so no change is missed. Writes to
   * the output streams not in `streams` (all of them when it is absent) do not count as changes: a waiter for the
   * receipt alone is not woken by every write of a command that streams (tens of thousands per 256 MiB, each one a
   * check, which took the main thread from the followers reading those bytes). With `streams` false the directory
   * is not watched at all: `wake` is called on every change that matters.
   */
  async waitUntil<T>(
    operationId: string,
    check: () => Promise<T | undefined>,
    timeoutMs: number,
    subscribe?: (wake: () => void) => () => void,
    streams?: readonly OutputStream[] | false,
  ): Promise<T | undefined> {
    const deadline = Date.now() + timeoutMs;
    let dirty = false;
    let wake: (() => void) | undefined;
    const poke = (): void => {
      dirty = true;
      wake?.();
    };
    const ignored = streams && new Set<string>(outputStreams.filter((s) => !streams.includes(s)));
    const onChange = ignored ? (type: string, name: string | null) => (type === 'change' && ignored.has(name!) ? undefined : poke()) : poke;
    const watcher = streams === false ? undefined : this.watch(operationId, onChange);
    const unsubscribe = subscribe?.(poke);
    try {
      for (;;) {
        dirty = false;
        const result = await check();
        if (result !== undefined) return result;
        const left = deadline - Date.now();
        if (left <= 0) return undefined;
        if (dirty) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, RECHECK_MS));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      watcher?.close();
      unsubscribe?.();
    }
  }

  /** Watches the directory the operation's descriptor holds (never a link's target), else the root. */
  private watch(operationId: string, onChange: (type: string, name: string | null) => void): FSWatcher | undefined {
    let opFd: number | undefined;
    try {
      opFd = this.openOp(operationId);
    } catch {
      // Not a directory of ours (a link in its place): the root's changes and the recheck wake the waiter.
    }
    try {
      for (const path of [opFd === undefined ? undefined : `/proc/self/fd/${opFd}`, this.root]) {
        if (path === undefined) continue;
        try {
          const watcher = watch(path, { persistent: false }, onChange);
          watcher.on('error', () => onChange('error', null));
          return watcher;
        } catch (e) {
          if (!isMissing(e)) throw e;
        }
      }
      return undefined;
    } finally {
      if (opFd !== undefined) closeSync(opFd);
    }
  }

  /** Closes the descriptors kept open for reading; the spool stays usable (they reopen on demand). */
  close(): void {
    const kept = [...this.fds.values()];
    this.fds.clear();
    for (const { fd } of kept) this.dropFd(fd);
    for (const fd of this.dirs.values()) closeSync(fd);
    this.dirs.clear();
    if (this.rootFd !== undefined) closeSync(this.rootFd);
    this.rootFd = undefined;
  }

  /**
   * Drops the operation's directory: only once its output is saved elsewhere. Every entry goes through the
   * directory's descriptor (spool-dir.ts: a link goes as a link, a directory the command made goes level by level,
   * never followed). Its few flat files go with synchronous unlinks (microseconds each), except a large output file,
   * whose blocks take milliseconds per hundred MiB to free (tens for 256 MiB): that unlink goes to the thread pool.
   * The directory itself goes with one asynchronous rmdir, which can take a journal write (half a millisecond on a
   * busy disk) the event loop need not wait for.
   */
  async release(operationId: string): Promise<void> {
    this.receipts.delete(operationId);
    this.closeOutputs(operationId);
    this.forgetDir(operationId);
    // A descriptor of its own: the removal awaits, and a held one may be closed (and its number reused) meanwhile.
    let dir: number | undefined;
    try {
      dir = this.openOp(operationId);
    } catch {
      // A link (or a file) in the directory's place: it goes as what it is, its target untouched.
      this.inRoot((root) => removeEntryAt(root, operationId));
      return;
    }
    if (dir === undefined) return;
    try {
      for (const name of readdirSync(at(dir, '.'))) {
        const stats = lstatAt(dir, name);
        if (stats?.isFile() && stats.size > LARGE_UNLINK_BYTES) await unlink(at(dir, name)).catch((e) => isMissing(e) || Promise.reject(e));
        else removeEntryAt(dir, name);
      }
    } finally {
      closeSync(dir);
    }
    const root = this.rootDir();
    if (root === undefined) return;
    try {
      await rmdir(at(root, operationId));
    } catch (e) {
      // Something was added since it was listed (an escaped process), or the directory was swapped for a link.
      if (!isMissing(e)) this.inRoot((rootFd) => removeEntryAt(rootFd, operationId));
    }
  }
}

function sizesAt(dir: number): StreamSizes {
  return { stdout: outputSize(dir, 'stdout'), stderr: outputSize(dir, 'stderr'), pty: outputSize(dir, 'pty') };
}

/**
 * The first reader after the receipt freezes the sizes; every later reader agrees with it. A `sizes` entry that is
 * not a complete line of a regular file (a command's, made before the receipt) is removed and written anew.
 */
function finalSizes(dir: number): StreamSizes {
  for (let attempt = 0; attempt < 3; attempt++) {
    const frozen = readSmallAt(dir, 'sizes');
    const parsed = frozen && parseLine<StreamSizes>(frozen.text);
    if (parsed && outputStreams.every((s) => Number.isSafeInteger(parsed[s]))) return parsed;
    const sizes = sizesAt(dir);
    if (createAt(dir, 'sizes', `${JSON.stringify(sizes)}\n`)) return sizes;
    if (frozen) removeEntryAt(dir, 'sizes');
  }
  return sizesAt(dir);
}
