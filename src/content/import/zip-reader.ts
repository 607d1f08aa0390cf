/**
 * A zip reader over a file (zip keeps its index at the end, so a body is spooled first): the central directory is
 * the truth (local headers may carry zero sizes), zip64 sizes and offsets, stored and deflate members (inflated with
 * zlib.inflateRaw, size and CRC-32 verified), unix file types from the external attributes (symlinks, devices).
 * Every member is counted on the meter while the directory is parsed, before anything is inflated, so a zip that
 * declares too many members or too many bytes is refused without inflating any.
 */
import { crc32, createInflateRaw } from 'node:zlib';
import { open, type FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { BerthError } from '../../../schemas/errors.ts';
import type { ArchiveMember, MemberKind } from './archive-member.ts';
import type { ImportMeter } from './import-meter.ts';

const EOCD_SIG = 0x06054b50;
const ZIP64_LOCATOR_SIG = 0x07064b50;
const ZIP64_EOCD_SIG = 0x06064b50;
const CENTRAL_SIG = 0x02014b50;
const LOCAL_SIG = 0x04034b50;
const MAX_COMMENT = 0xffff;
const RAW_CHUNK = 256 * 1024;
/** The central directory is read whole: 50,000 members with long names fit easily; a claimed huge one is refused. */
const MAX_CENTRAL_DIRECTORY_BYTES = 64 * 1024 * 1024;

interface CentralEntry {
  name: string;
  kind: MemberKind;
  mode: number;
  method: number;
  crc: number;
  compressedSize: number;
  size: number;
  localOffset: number;
}

/** Members of the zip file at `file`. The meter is given the archive size as its compressed byte count. */
export async function* readZip(file: string, meter: ImportMeter): AsyncGenerator<ArchiveMember> {
  const handle = await open(file, 'r');
  try {
    const { size: fileSize } = await handle.stat();
    meter.compressed(fileSize);
    const entries = await readCentralDirectory(handle, fileSize, meter);
    for (const entry of entries) {
      yield { path: entry.name, kind: entry.kind, size: entry.size, mode: entry.mode, body: () => memberBytes(handle, entry, fileSize, meter) };
    }
  } finally {
    await handle.close();
  }
}

async function readAt(handle: FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  const { bytesRead } = await handle.read(buffer, 0, length, position);
  if (bytesRead < length) throw corrupt('The zip ends early.');
  return buffer;
}

async function readCentralDirectory(handle: FileHandle, fileSize: number, meter: ImportMeter): Promise<CentralEntry[]> {
  const tailLength = Math.min(fileSize, 22 + MAX_COMMENT);
  const tail = await readAt(handle, fileSize - tailLength, tailLength);
  let eocd = -1;
  for (let i = tail.length - 22; i >= 0; i--) {
    if (tail.readUInt32LE(i) === EOCD_SIG && i + 22 + tail.readUInt16LE(i + 20) === tail.length) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw corrupt('No zip end-of-central-directory record.');
  let count = tail.readUInt16LE(eocd + 10);
  let cdSize = tail.readUInt32LE(eocd + 12);
  let cdOffset = tail.readUInt32LE(eocd + 16);
  if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
    const locatorAt = fileSize - tailLength + eocd - 20;
    const locator = locatorAt >= 0 ? await readAt(handle, locatorAt, 20) : null;
    if (locator && locator.readUInt32LE(0) === ZIP64_LOCATOR_SIG) {
      const record = await readAt(handle, safe(locator.readBigUInt64LE(8)), 56);
      if (record.readUInt32LE(0) !== ZIP64_EOCD_SIG) throw corrupt('A zip64 end record is missing.');
      count = safe(record.readBigUInt64LE(32));
      cdSize = safe(record.readBigUInt64LE(40));
      cdOffset = safe(record.readBigUInt64LE(48));
    }
  }
  if (cdOffset + cdSize > fileSize) throw corrupt('The zip central directory is outside the file.');
  if (cdSize > MAX_CENTRAL_DIRECTORY_BYTES) {
    throw new BerthError('environment_invalid', 'The zip central directory is too large.', { reason: 'too_large', limit: MAX_CENTRAL_DIRECTORY_BYTES });
  }
  // Refuse by the declared count before reading a byte of the directory.
  for (let i = 0; i < count; i++) meter.entry();
  const cd = await readAt(handle, cdOffset, cdSize);
  const entries: CentralEntry[] = [];
  let pos = 0;
  while (pos < cd.length && entries.length < count) {
    if (pos + 46 > cd.length || cd.readUInt32LE(pos) !== CENTRAL_SIG) throw corrupt('A zip central directory entry is malformed.');
    const entry = parseCentralEntry(cd, pos);
    meter.declare(entry.size);
    entries.push(entry);
    pos += 46 + cd.readUInt16LE(pos + 28) + cd.readUInt16LE(pos + 30) + cd.readUInt16LE(pos + 32);
  }
  if (entries.length !== count) throw corrupt('The zip central directory has fewer entries than it says.');
  return entries;
}

function parseCentralEntry(cd: Buffer, pos: number): CentralEntry {
  const madeBy = cd.readUInt16LE(pos + 4) >> 8;
  const flags = cd.readUInt16LE(pos + 8);
  const method = cd.readUInt16LE(pos + 10);
  const nameLength = cd.readUInt16LE(pos + 28);
  const extraLength = cd.readUInt16LE(pos + 30);
  const external = cd.readUInt32LE(pos + 38);
  if (pos + 46 + nameLength + extraLength > cd.length) throw corrupt('A zip central directory entry is truncated.');
  const name = cd.toString('utf8', pos + 46, pos + 46 + nameLength);
  let size = cd.readUInt32LE(pos + 24);
  let compressedSize = cd.readUInt32LE(pos + 20);
  let localOffset = cd.readUInt32LE(pos + 42);
  // Zip64 extra field: the 64-bit values, in this order, for the fields that hold 0xffffffff.
  const extra = cd.subarray(pos + 46 + nameLength, pos + 46 + nameLength + extraLength);
  for (let e = 0; e + 4 <= extra.length; ) {
    const id = extra.readUInt16LE(e);
    const length = extra.readUInt16LE(e + 2);
    if (id === 0x0001) {
      let at = e + 4;
      const next = () => {
        if (at + 8 > e + 4 + length) throw corrupt('A zip64 extra field is truncated.');
        const value = safe(extra.readBigUInt64LE(at));
        at += 8;
        return value;
      };
      if (size === 0xffffffff) size = next();
      if (compressedSize === 0xffffffff) compressedSize = next();
      if (localOffset === 0xffffffff) localOffset = next();
    }
    e += 4 + length;
  }
  // Unix (3) and macOS (19) writers keep st_mode in the high 16 bits of the external attributes.
  const unixMode = madeBy === 3 || madeBy === 19 ? external >>> 16 : 0;
  let kind = kindOf(unixMode, name, external);
  if (flags & 0x1 || (kind === 'file' && method !== 0 && method !== 8)) kind = 'unsupported';
  return { name, kind, mode: unixMode & 0o7777, method, crc: cd.readUInt32LE(pos + 16), compressedSize, size, localOffset };
}

function kindOf(unixMode: number, name: string, external: number): MemberKind {
  switch (unixMode & 0o170000) {
    case 0o120000:
      return 'symlink';
    case 0o040000:
      return 'directory';
    case 0o020000:
    case 0o060000:
      return 'device';
    case 0o010000:
      return 'fifo';
    case 0o140000:
      return 'socket';
  }
  return name.endsWith('/') || external & 0x10 ? 'directory' : 'file';
}

async function* memberBytes(handle: FileHandle, entry: CentralEntry, fileSize: number, meter: ImportMeter): AsyncGenerator<Buffer> {
  if (entry.kind !== 'file') return;
  const local = await readAt(handle, entry.localOffset, 30);
  if (local.readUInt32LE(0) !== LOCAL_SIG) throw corrupt('A zip local header is missing.');
  const start = entry.localOffset + 30 + local.readUInt16LE(26) + local.readUInt16LE(28);
  if (start + entry.compressedSize > fileSize) throw corrupt('A zip member is outside the file.');
  if (entry.method === 0 && entry.compressedSize !== entry.size) throw corrupt('A stored zip member has two sizes.');
  if (entry.compressedSize === 0) {
    verify(entry, 0, 0);
    return;
  }

  const raw = rawChunks(handle, start, entry.compressedSize);
  const inflate = entry.method === 8 ? createInflateRaw() : null;
  const input = inflate ? Readable.from(raw) : null;
  if (input && inflate) {
    input.on('error', (e) => inflate.destroy(e));
    input.pipe(inflate);
  }
  const source: AsyncIterable<Buffer> = inflate ?? raw;
  let produced = 0;
  let crc = 0;
  try {
    for await (const chunk of source) {
      produced += chunk.length;
      if (produced > entry.size) throw corrupt('A zip member inflates past its declared size.');
      if (inflate) meter.expanded(chunk.length);
      crc = crc32(chunk, crc);
      yield chunk;
    }
  } catch (e) {
    if (e instanceof BerthError) throw e;
    throw corrupt('A zip member does not inflate.');
  } finally {
    input?.destroy();
    inflate?.destroy();
  }
  verify(entry, produced, crc);
}

/** The stored bytes of a member, read at their offsets (positional reads share the one file handle). */
async function* rawChunks(handle: FileHandle, start: number, length: number): AsyncGenerator<Buffer> {
  for (let done = 0; done < length; ) {
    const chunk = await readAt(handle, start + done, Math.min(RAW_CHUNK, length - done));
    done += chunk.length;
    yield chunk;
  }
}

function verify(entry: CentralEntry, produced: number, crc: number): void {
  if (produced !== entry.size) throw corrupt('A zip member is shorter than its declared size.');
  if (crc >>> 0 !== entry.crc >>> 0) throw corrupt('A zip member fails its CRC-32 check.');
}

function safe(value: bigint): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw corrupt('A zip64 number is too large.');
  return Number(value);
}

function corrupt(message: string): BerthError {
  return new BerthError('environment_invalid', message, { reason: 'corrupt_archive' });
}
