/**
 * The host side of the spool protocol that supervisor.sh documents (version 1): parsing its files, turning them into
 * an executor Receipt, reading output by cursor, waiting for changes, the abandon fence and release. Shared by every
 * executor whose spool directory the host can reach; the parsers stand alone for executors that fetch the files
 * some other way.
 */
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  read,
  readdirSync,
  readFileSync,
  renameSync,
  statSync,
  unlinkSync,
  watch,
  writeFileSync,
  type FSWatcher,
} from 'node:fs';
import { rm, rmdir, unlink } from 'node:fs/promises';
import { constants as osConstants } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BerthError } from '../../schemas/errors.ts';
import type { OutputChunk, OutputStream, Receipt } from './provider.ts';

export const SPOOL_PROTOCOL_VERSION = 1 as const;

/** The supervisor script, to run with `/bin/sh` (native) or to mount read-only into containers. */
export const SUPERVISOR_PATH = fileURLToPath(new URL('./supervisor.sh', import.meta.url));

export const OUTPUT_STREAMS: readonly OutputStream[] = ['stdout', 'stderr', 'pty'];

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
const isTaken = (e: unknown): boolean => (e as NodeJS.ErrnoException).code === 'EEXIST';

/** A small file's text and mtime, or undefined when it does not exist. */
function readSmall(path: string): { text: string; mtime: Date } | undefined {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    if (isMissing(e)) return undefined;
    throw e;
  }
  try {
    return { text: readFileSync(fd, 'utf8'), mtime: fstatSync(fd).mtime };
  } finally {
    closeSync(fd);
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch (e) {
    if (isMissing(e)) return 0;
    throw e;
  }
}

const readAt = (fd: number, buffer: Buffer, offset: number, length: number, position: number): Promise<number> =>
  new Promise((resolve, reject) => read(fd, buffer, offset, length, position, (e, n) => (e ? reject(e) : resolve(n))));

const EMPTY = Buffer.alloc(0);
const MAX_OPEN_OUTPUTS = 64;
export const DEFAULT_READ_BYTES = 1024 * 1024;
/** A file larger than this is unlinked off the event loop (see release). */
const LARGE_UNLINK_BYTES = 16 * 1024 * 1024;
/** Watch events can be lost on some filesystems; waiters look again at least this often. */
const RECHECK_MS = 250;

/**
 * A spool root: one directory per operation. Caches only what never changes (receipts).
 *
 * The protocol files other than the output streams hold a few bytes each, on the local data directory: they are
 * read and written with synchronous calls, which cost microseconds, where a thread-pool round trip per file costs
 * far more on a busy host. Output is read asynchronously.
 */
export class Spool {
  private readonly receipts = new Map<string, FinalReceipt>();
  private readonly fds = new Map<string, number>();

  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  dir(operationId: string): string {
    assertOperationId(operationId);
    return join(this.root, operationId);
  }

  file(operationId: string, name: string): string {
    return join(this.dir(operationId), name);
  }

  /** mkdir of the operation's directory: true when this call created it, false when it already existed. */
  async create(operationId: string): Promise<boolean> {
    const dir = this.dir(operationId);
    try {
      mkdirSync(dir);
      return true;
    } catch (e) {
      if (isTaken(e)) return false;
      if (!isMissing(e)) throw e;
    }
    mkdirSync(this.root, { recursive: true });
    return this.create(operationId);
  }

  /** The operation's directory, made if missing (with the spool root). */
  async prepare(operationId: string): Promise<string> {
    const dir = this.dir(operationId);
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  /** O_EXCL create of `claim`: true when this caller owns the operation now. */
  async claim(operationId: string, content: string): Promise<boolean> {
    await this.prepare(operationId);
    try {
      writeFileSync(this.file(operationId, 'claim'), `${content}\n`, { flag: 'wx' });
      return true;
    } catch (e) {
      if (isTaken(e)) return false;
      throw e;
    }
  }

  /** The recovery fence: true when the operation can now never start; false when someone claimed it first. */
  abandon(operationId: string): Promise<boolean> {
    return this.claim(operationId, 'abandoned');
  }

  async readClaim(operationId: string): Promise<Claim | undefined> {
    const file = readSmall(this.file(operationId, 'claim'));
    return file && parseClaim(file.text);
  }

  async readStarted(operationId: string): Promise<Started | undefined> {
    const file = readSmall(this.file(operationId, 'started'));
    return file && parseStarted(file.text, file.mtime);
  }

  async readReceipt(operationId: string): Promise<FinalReceipt | undefined> {
    const cached = this.receipts.get(operationId);
    if (cached) return cached;
    const file = readSmall(this.file(operationId, 'receipt'));
    const line = file && parseReceiptLine(file.text);
    if (!line) return undefined;
    const receipt: FinalReceipt = { ...line, exitedAt: file.mtime.toISOString(), sizes: this.finalSizes(operationId) };
    this.receipts.set(operationId, receipt);
    return receipt;
  }

  async readState(operationId: string): Promise<SpoolState> {
    const claim = await this.readClaim(operationId);
    if (!claim) return {};
    const started = await this.readStarted(operationId);
    const receipt = await this.readReceipt(operationId);
    return { claim, ...(started ? { started } : {}), ...(receipt ? { receipt } : {}) };
  }

  /** Host-owned runs (PTY) write their receipt themselves: complete or not at all. */
  async writeReceipt(operationId: string, r: ReceiptFields): Promise<void> {
    const tmp = this.file(operationId, 'receipt.tmp');
    writeFileSync(tmp, receiptLine(r));
    renameSync(tmp, this.file(operationId, 'receipt'));
  }

  async marker(operationId: string, name: 'cancel' | 'timedout'): Promise<void> {
    writeFileSync(this.file(operationId, name), '');
  }

  async hasMarker(operationId: string, name: 'cancel' | 'timedout'): Promise<boolean> {
    return existsSync(this.file(operationId, name));
  }

  async currentSizes(operationId: string): Promise<StreamSizes> {
    const [stdout, stderr, pty] = OUTPUT_STREAMS.map((s) => sizeOf(this.file(operationId, s)));
    return { stdout, stderr, pty };
  }

  /** The first reader after the receipt freezes the sizes; every later reader agrees with it. */
  private finalSizes(operationId: string): StreamSizes {
    const path = this.file(operationId, 'sizes');
    const frozen = readSmall(path);
    const parsed = frozen && parseLine<StreamSizes>(frozen.text);
    if (parsed) return parsed;
    const [stdout, stderr, pty] = OUTPUT_STREAMS.map((s) => sizeOf(this.file(operationId, s)));
    const sizes = { stdout, stderr, pty };
    try {
      writeFileSync(path, `${JSON.stringify(sizes)}\n`, { flag: 'wx' });
      return sizes;
    } catch (e) {
      if (!isTaken(e)) throw e;
      return this.finalSizes(operationId);
    }
  }

  /**
   * Bytes of `stream` from byte offset `cursor`, at most `maxBytes` (and at most the length of `into`, when the
   * bytes are to land there). `closed` once the receipt exists and the cursor reached the stream's final size; bytes
   * past the final size are never returned.
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
    const receipt = await this.readReceipt(operationId);
    const final = receipt !== undefined;
    const fd = this.outputFd(operationId, stream);
    const size = receipt ? receipt.sizes[stream] : fd === undefined ? 0 : fstatSync(fd).size;
    const want = Math.max(0, Math.min(maxBytes, into?.length ?? maxBytes, size - cursor));
    if (fd === undefined || want === 0) {
      return { data: EMPTY, next: cursor, closed: final && cursor >= size, size, final };
    }
    const data = into ? into.subarray(0, want) : Buffer.allocUnsafe(want);
    let got = 0;
    while (got < want) {
      const bytesRead = await readAt(fd, data, got, want - got, cursor + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    const next = cursor + got;
    return { data: got === want ? data : data.subarray(0, got), next, closed: final && next >= size, size, final };
  }

  /** Output descriptors stay open between reads (a follower reads many chunks); the oldest close past a bound. */
  private outputFd(operationId: string, stream: OutputStream): number | undefined {
    const key = `${operationId}/${stream}`;
    const cached = this.fds.get(key);
    // Still the file at that path? (Another instance may have released the operation and it may have run anew.)
    const current = statSync(this.file(operationId, stream), { throwIfNoEntry: false });
    if (cached !== undefined && fstatSync(cached).ino === current?.ino) return cached;
    if (cached !== undefined) {
      closeSync(cached);
      this.fds.delete(key);
    }
    let fd: number;
    try {
      fd = openSync(this.file(operationId, stream), 'r');
    } catch (e) {
      if (isMissing(e)) return undefined;
      throw e;
    }
    this.fds.set(key, fd);
    for (const [oldest, oldFd] of this.fds) {
      if (this.fds.size <= MAX_OPEN_OUTPUTS) break;
      closeSync(oldFd);
      this.fds.delete(oldest);
    }
    return fd;
  }

  private closeOutputs(operationId: string): void {
    for (const stream of OUTPUT_STREAMS) {
      const key = `${operationId}/${stream}`;
      const fd = this.fds.get(key);
      if (fd !== undefined) closeSync(fd);
      this.fds.delete(key);
    }
  }

  /**
   * Resolves with the first defined result of `check`, re-run after every change in the operation's directory (or
   * the spool root while the directory does not exist), every `wake` call, and at least every 250 ms; resolves
   * undefined after `timeoutMs`. The watcher is set up before the first check, so no change is missed.
   */
  async waitUntil<T>(
    operationId: string,
    check: () => Promise<T | undefined>,
    timeoutMs: number,
    subscribe?: (wake: () => void) => () => void,
  ): Promise<T | undefined> {
    const deadline = Date.now() + timeoutMs;
    let dirty = false;
    let wake: (() => void) | undefined;
    const poke = (): void => {
      dirty = true;
      wake?.();
    };
    const watcher = this.watch(operationId, poke);
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

  private watch(operationId: string, onChange: () => void): FSWatcher | undefined {
    for (const path of [this.dir(operationId), this.root]) {
      try {
        const watcher = watch(path, { persistent: false }, onChange);
        watcher.on('error', onChange);
        return watcher;
      } catch (e) {
        if (!isMissing(e)) throw e;
      }
    }
    return undefined;
  }

  /** Closes the output files kept open for reading; the spool stays usable (they reopen on demand). */
  close(): void {
    for (const fd of this.fds.values()) closeSync(fd);
    this.fds.clear();
  }

  /**
   * Drops the operation's directory: only once its output is saved elsewhere. Its few flat files go with synchronous
   * unlinks (microseconds each, where a recursive rm costs a thread-pool round trip per file), except a large output
   * file, whose blocks take milliseconds per hundred MiB to free (tens for 256 MiB): that unlink goes to the thread
   * pool. The directory itself goes with one asynchronous rmdir, which can take a journal write (half a millisecond on
   * a busy disk) the event loop need not wait for; anything else (a directory a command made there) falls back to the
   * recursive rm.
   */
  async release(operationId: string): Promise<void> {
    this.receipts.delete(operationId);
    this.closeOutputs(operationId);
    const dir = this.dir(operationId);
    try {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        try {
          if ((statSync(path, { throwIfNoEntry: false })?.size ?? 0) > LARGE_UNLINK_BYTES) await unlink(path);
          else unlinkSync(path);
        } catch (e) {
          if (!isMissing(e)) throw e;
        }
      }
      await rmdir(dir);
    } catch (e) {
      if (!isMissing(e)) await rm(dir, { recursive: true, force: true });
    }
  }
}
