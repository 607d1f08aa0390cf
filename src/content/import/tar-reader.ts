/**
 * A streaming tar reader: ustar and old-GNU headers, pax `x` extended headers (path, size), GNU `L` long names,
 * base-256 numeric fields. Members are yielded one at a time; a member's body streams straight from the input and is
 * skipped if the consumer does not read it. Link names are not needed: links are never landed. Caps are counted per
 * member before its bytes are read, so a declared 1 GiB member is refused from its header.
 */
import { BerthError } from '../../../schemas/errors.ts';
import type { ArchiveMember, MemberKind } from './archive-member.ts';
import type { ByteReader } from './byte-reader.ts';
import type { ImportMeter } from './import-meter.ts';

const BLOCK = 512;
/** Pax and GNU long-name bodies are read into memory: bounded so a header cannot be a memory bomb. */
const MAX_META_BYTES = 1024 * 1024;
/**
 * Extended headers in a row before one member (a pax `x`, a GNU `L` and `K` are usually all of it): past this the
 * archive is refused, so a stream of nothing but extended headers is not read on and on.
 */
const MAX_META_RUN_BYTES = 4 * MAX_META_BYTES;
/**
 * Records in one pax header. Writers put a handful there (path, size, times, a few xattrs); a megabyte of tiny records
 * is about 100,000 of them, whose parse held the event loop 50 ms per header (1 ms up to this bound).
 */
const MAX_PAX_RECORDS = 1024;
/** The pax keys a member's landing uses; any other is dropped as it is read, so no set of keys grows. */
const PAX_KEYS: ReadonlySet<string> = new Set(['path', 'size']);

interface Header {
  name: string;
  mode: number;
  size: number;
  type: string;
}

/** Members of the tar on `reader`; each is counted on `meter` (count and declared size) before it is yielded. */
export async function* readTar(reader: ByteReader, meter: ImportMeter): AsyncGenerator<ArchiveMember> {
  let pax: Record<string, string> = {};
  let longName: string | undefined;
  /** Bytes of the extended headers read since the last member. */
  let metaRun = 0;
  for (;;) {
    const block = await reader.read(BLOCK);
    if (block.length === 0) return; // some writers omit the end-of-archive blocks
    if (block.length < BLOCK) throw corrupt('The tar stream ends inside a header.');
    if (isZeroBlock(block)) return;
    const header = parseHeader(block);

    if (header.type === 'x' || header.type === 'g' || header.type === 'L' || header.type === 'K') {
      if (header.size > MAX_META_BYTES) throw corrupt('A tar extended header is too large.');
      // They are read like members: their bytes count on the archive's cap, and a run of them is bounded.
      metaRun += BLOCK + header.size + padding(header.size);
      if (metaRun > MAX_META_RUN_BYTES) throw corrupt('Too many tar extended headers before a member.');
      meter.declare(BLOCK + header.size + padding(header.size));
      const meta = await reader.read(header.size);
      if (meta.length < header.size) throw corrupt('The tar stream ends inside an extended header.');
      await skipExactly(reader, padding(header.size));
      // Global pax headers (`g`, e.g. git's commit comment) and long link names (`K`) change nothing we land.
      if (header.type === 'x') pax = { ...pax, ...parsePax(meta) };
      if (header.type === 'L') longName = meta.toString('utf8').replace(/\0+$/, '');
      continue;
    }

    const kind = kindOf(header.type);
    const hasData = kind === 'file' || kind === 'unsupported';
    const size = hasData ? (pax.size !== undefined ? paxSize(pax.size) : header.size) : 0;
    const name = pax.path ?? longName ?? header.name;
    pax = {};
    longName = undefined;
    metaRun = 0;
    meter.entry();
    meter.declare(size);

    let remaining = size;
    const body = async function* (): AsyncGenerator<Buffer> {
      for await (const chunk of reader.stream(remaining)) {
        remaining -= chunk.length;
        yield chunk;
      }
      if (remaining > 0) throw corrupt('The tar stream ends inside a member.');
    };
    yield { path: name, kind, size, mode: header.mode, body };
    if (remaining > 0) await skipExactly(reader, remaining);
    await skipExactly(reader, padding(size));
  }
}

function kindOf(type: string): MemberKind {
  switch (type) {
    case '0':
    case '\0':
    case '7':
      return 'file';
    case '5':
      return 'directory';
    case '1':
      return 'hardlink';
    case '2':
      return 'symlink';
    case '3':
    case '4':
      return 'device';
    case '6':
      return 'fifo';
    default:
      return 'unsupported';
  }
}

/** Whether a 512-byte block is a tar header: its checksum matches (old V7 tars have no magic to look for). */
export function isTarHeader(block: Buffer): boolean {
  if (block.length < BLOCK || isZeroBlock(block)) return false;
  let stored: number;
  try {
    stored = parseNumber(block, 148, 8);
  } catch {
    return false;
  }
  let unsigned = 0;
  let signed = 0;
  for (let i = 0; i < BLOCK; i++) {
    const byte = i >= 148 && i < 156 ? 0x20 : block[i];
    unsigned += byte;
    signed += byte > 127 ? byte - 256 : byte;
  }
  return stored === unsigned || stored === signed;
}

function parseHeader(block: Buffer): Header {
  if (!isTarHeader(block)) throw corrupt('A tar header checksum does not match (not a tar, or damaged).');
  const magic = block.toString('latin1', 257, 263);
  let name = cString(block, 0, 100);
  // POSIX ustar splits long names into prefix/name; old GNU headers use those bytes for times.
  if (magic === 'ustar\0') {
    const prefix = cString(block, 345, 155);
    if (prefix) name = `${prefix}/${name}`;
  }
  return {
    name,
    mode: parseNumber(block, 100, 8),
    size: parseNumber(block, 124, 12),
    type: String.fromCharCode(block[156]),
  };
}

/** An octal text field, or a base-256 one (high bit of the first byte set) as GNU and star write big sizes. */
function parseNumber(block: Buffer, offset: number, length: number): number {
  const first = block[offset];
  if (first & 0x80) {
    if (first === 0xff) throw corrupt('A tar header has a negative number.');
    let value = first & 0x7f;
    for (let i = 1; i < length; i++) value = value * 256 + block[offset + i];
    if (!Number.isSafeInteger(value)) throw corrupt('A tar header number is too large.');
    return value;
  }
  const text = block.toString('latin1', offset, offset + length).replace(/[\0 ]+$/, '').replace(/^ +/, '');
  if (text === '') return 0;
  if (!/^[0-7]+$/.test(text)) throw corrupt('A tar header has a malformed number (not a tar, or damaged).');
  return parseInt(text, 8);
}

/** Pax records: "<length> <key>=<value>\n", the length counting the whole record in bytes. */
function parsePax(meta: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  let pos = 0;
  for (let records = 0; pos < meta.length; records++) {
    if (meta[pos] === 0) break;
    if (records === MAX_PAX_RECORDS) throw corrupt('A pax extended header has too many records.');
    const space = meta.indexOf(0x20, pos);
    const length = space > pos ? Number(meta.toString('latin1', pos, space)) : NaN;
    if (!Number.isSafeInteger(length) || length <= space - pos || pos + length > meta.length || meta[pos + length - 1] !== 0x0a) {
      throw corrupt('A pax extended header is malformed.');
    }
    const record = meta.subarray(space + 1, pos + length - 1);
    const eq = record.indexOf(0x3d);
    if (eq <= 0) throw corrupt('A pax extended header record has no key.');
    const key = record.toString('utf8', 0, eq);
    if (PAX_KEYS.has(key)) out[key] = record.toString('utf8', eq + 1);
    pos += length;
  }
  return out;
}

function paxSize(text: string): number {
  const value = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isSafeInteger(value)) throw corrupt('A pax size is malformed.');
  return value;
}

function cString(block: Buffer, offset: number, length: number): string {
  const field = block.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return field.toString('utf8', 0, end === -1 ? length : end);
}

function isZeroBlock(block: Buffer): boolean {
  for (let i = 0; i < BLOCK; i++) if (block[i] !== 0) return false;
  return true;
}

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK;

async function skipExactly(reader: ByteReader, n: number): Promise<void> {
  if ((await reader.skip(n)) < n) throw corrupt('The tar stream ends inside a member.');
}

function corrupt(message: string): BerthError {
  return new BerthError('environment_invalid', message, { reason: 'corrupt_archive' });
}
