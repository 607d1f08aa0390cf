/**
 * The byte version of a workspace file: its size and the sha256 of its bytes, read from a descriptor the caller
 * opened without following anything. Shared by the file tools (a write's before/after) and the manifest walk.
 */
import { createHash } from 'node:crypto';
import { read } from 'node:fs';
import { promisify } from 'node:util';

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
 * from an earlier fstat only when someone changes the file meanwhile.
 */
export async function stampOfFd(fd: number, onChunk?: (chunk: Buffer, offset: number) => void): Promise<FileStamp> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  let offset = 0;
  for (;;) {
    const { bytesRead } = await readAsync(fd, buffer, 0, CHUNK_BYTES, offset);
    if (bytesRead === 0) break;
    const chunk = buffer.subarray(0, bytesRead);
    hash.update(chunk);
    onChunk?.(chunk, offset);
    offset += bytesRead;
  }
  return { size: offset, hash: `sha256:${hash.digest('hex')}` };
}
