/**
 * The byte version of a workspace file: its size and the sha256 of its bytes, read from a descriptor the caller
 * opened without following anything. Shared by the file tools (a write's before/after) and the manifest walk.
 */
import { createHash } from 'node:crypto';
import { read, readSync, type BigIntStats } from 'node:fs';
import { promisify } from 'node:util';
import { ctimeWillMove, fineCtime } from '../../providers/ctime-grain.ts';

export interface FileStamp {
  size: number;
  /** 'sha256:<hex>' of the bytes; '' for a directory. */
  hash: string;
}

export const DIRECTORY_STAMP: FileStamp = { size: 0, hash: '' };

/** The version of bytes already in memory. */
export const versionOf = (bytes: Uint8Array): string => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

export const readAsync = promisify(read);

/** Bytes hashed per read: large enough that the read calls cost little next to hashing, small enough to bound memory. */
const CHUNK_BYTES = 1 << 20;

/**
 * Hashes the whole file open as `fd` from offset 0, one chunk in memory at a time. `onChunk` sees each chunk with
 * its file offset (the tools copy a requested range out of it). The stamp's size is what was read, which differs
 * from an earlier fstat only when someone changes the file meanwhile. `sizeHint`: the size fstat gave, if known.
 */
export async function stampOfFd(fd: number, onChunk?: (chunk: Buffer, offset: number) => void, sizeHint = CHUNK_BYTES): Promise<FileStamp> {
  const hash = createHash('sha256');
  // A small file gets a small buffer: a megabyte allocated per file of a tree of thousands was most of its walk.
  const buffer = Buffer.allocUnsafe(Math.max(1, Math.min(CHUNK_BYTES, sizeHint + 1)));
  let offset = 0;
  for (;;) {
    const { bytesRead } = await readAsync(fd, buffer, 0, buffer.length, offset);
    if (bytesRead === 0) break;
    const chunk = buffer.subarray(0, bytesRead);
    hash.update(chunk);
    onChunk?.(chunk, offset);
    offset += bytesRead;
  }
  return { size: offset, hash: `sha256:${hash.digest('hex')}` };
}

/**
 * Versions already hashed, by file identity, size, mtime and ctime (git's index trick): a hit saves reading and
 * hashing the file again. The stats are always taken before the bytes are read, so a change during the hash moves
 * the ctime and a stamp of mixed bytes is never matched again, provided the change gets a later ctime than the one
 * taken: ctime-grain.ts says when it does (at once where ctimes are fine, else once the file has settled). ctime
 * cannot be set back without the clock.
 */
const known = new Map<string, { size: bigint; mtimeNs: bigint; ctimeNs: bigint; stamp: FileStamp }>();
/** As many as one workspace's manifest holds at most: a bigger workspace would evict its own stamps at each walk. */
const MAX_KNOWN = 100_000;

const identity = (stats: BigIntStats): string => `${stats.dev}:${stats.ino}`;

/** The wall clock in ns, taken just before the stats a stamp is remembered with. */
export const nowNs = (): bigint => BigInt(Date.now()) * 1_000_000n;

export function knownStamp(stats: BigIntStats): FileStamp | undefined {
  const entry = known.get(identity(stats));
  if (!entry || entry.size !== stats.size || entry.mtimeNs !== stats.mtimeNs || entry.ctimeNs !== stats.ctimeNs) return undefined;
  return entry.stamp;
}

export function rememberStamp(stats: BigIntStats, takenAtNs: bigint, stamp: FileStamp): void {
  if (!ctimeWillMove(stats, takenAtNs) || BigInt(stamp.size) !== stats.size) return;
  keep(stats, stamp);
}

/**
 * Remembers the version of bytes this process wrote and then renamed into place, given the stats taken after its
 * last change of the file (`written`) and after the rename (`placed`): on a filesystem with fine ctimes, a write by
 * anyone else after the first look gives a later mtime, so an unchanged mtime and size mean the bytes are still ours.
 * (The rename itself moves only the ctime.)
 */
export function rememberWritten(written: BigIntStats, placed: BigIntStats, stamp: FileStamp): void {
  if (!fineCtime(placed.dev) || placed.ino !== written.ino || placed.mtimeNs !== written.mtimeNs) return;
  if (placed.size !== written.size || BigInt(stamp.size) !== placed.size) return;
  keep(placed, stamp);
}

function keep(stats: BigIntStats, stamp: FileStamp): void {
  const key = identity(stats);
  known.delete(key);
  if (known.size >= MAX_KNOWN) known.delete(known.keys().next().value!);
  known.set(key, { size: stats.size, mtimeNs: stats.mtimeNs, ctimeNs: stats.ctimeNs, stamp });
}

/** Files this small are hashed with synchronous reads: a trip through the thread pool per read cost more. */
const SYNC_BYTES = 64 * 1024;

/** The stamp of a small file read in one go, or undefined when it holds more than `size` bytes now (it grows). */
function smallStamp(fd: number, size: number): FileStamp | undefined {
  const buffer = Buffer.allocUnsafe(size + 1);
  let offset = 0;
  for (let read; offset < buffer.length && (read = readSync(fd, buffer, offset, buffer.length - offset, offset)) > 0; ) offset += read;
  if (offset > size) return undefined;
  return { size: offset, hash: versionOf(buffer.subarray(0, offset)) };
}

/** The stamp of the file open as `fd`: remembered if settled and unchanged, else hashed (and remembered if settled). */
export async function stampOfOpenFile(fd: number, stats: BigIntStats, takenAtNs: bigint): Promise<FileStamp> {
  const remembered = knownStamp(stats);
  if (remembered) return remembered;
  const size = Number(stats.size);
  const stamp = (size <= SYNC_BYTES ? smallStamp(fd, size) : undefined) ?? (await stampOfFd(fd, undefined, size));
  rememberStamp(stats, takenAtNs, stamp);
  return stamp;
}
