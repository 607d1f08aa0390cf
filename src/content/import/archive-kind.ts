/** Which archive a body is, from its first bytes (the declared content type is not trusted). */
import { isTarHeader } from './tar-reader.ts';

export type ArchiveKind = 'tar' | 'gzip' | 'zip' | 'empty' | 'unknown' | 'bzip2' | 'xz' | 'zstd';

/** `head`: up to the first 512 bytes of the body. */
export function archiveKind(head: Buffer): ArchiveKind {
  if (head.length === 0) return 'empty';
  if (head[0] === 0x1f && head[1] === 0x8b) return 'gzip';
  if (head[0] === 0x50 && head[1] === 0x4b && ((head[2] === 3 && head[3] === 4) || (head[2] === 5 && head[3] === 6))) return 'zip';
  if (head.length >= 263 && head.toString('latin1', 257, 262) === 'ustar') return 'tar';
  if (isTarHeader(head) || (head.length === 512 && !head.some((b) => b !== 0))) return 'tar'; // an empty tar is zeros
  if (head.toString('latin1', 0, 3) === 'BZh') return 'bzip2';
  if (head.subarray(0, 6).equals(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]))) return 'xz';
  if (head.subarray(0, 4).equals(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))) return 'zstd';
  return 'unknown';
}
