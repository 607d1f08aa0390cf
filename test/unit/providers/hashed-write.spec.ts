/**
 * The upload writer that hashes on the pool (src/providers/hashed-write.c through hashed-write.ts): what it writes
 * and the digest it gives are the bytes' and node's sha256 of them, for chunks of any size and views into larger
 * buffers, over several calls; a failing write rejects with node's code for it.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashedWriter } from '../../../src/providers/hashed-write.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-hashed-write-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('hashed writes', () => {
  it('writes the chunks in order and digests exactly them, across calls', async () => {
    const writer = hashedWriter();
    expect(writer, 'the addon is built by npm ci').toBeDefined();
    const big = randomBytes(3 * 1024 * 1024 + 7);
    const batches: Uint8Array[][] = [
      [randomBytes(1), Buffer.alloc(0), big.subarray(5, 1_000_005)],
      [new Uint8Array(big.buffer, big.byteOffset + 17, 64 * 1024 + 3)],
      [big, Buffer.from('end')],
    ];
    const file = join(dir, 'upload.bin');
    const fd = openSync(file, 'w');
    try {
      for (const batch of batches) await writer!.write(fd, batch);
    } finally {
      closeSync(fd);
    }
    const expected = Buffer.concat(batches.flat());
    expect(readFileSync(file).equals(expected)).toBe(true);
    expect(writer!.digest()).toBe(createHash('sha256').update(expected).digest('hex'));
  });

  it('digests nothing written as the empty sha256', () => {
    expect(hashedWriter()!.digest()).toBe(createHash('sha256').digest('hex'));
  });

  it('rejects a write the kernel refuses with its code', async () => {
    const fd = openSync(join(dir, 'read-only.bin'), 'w+');
    closeSync(fd);
    const readOnly = openSync(join(dir, 'read-only.bin'), 'r');
    try {
      await expect(hashedWriter()!.write(readOnly, [Buffer.from('x')])).rejects.toMatchObject({ code: 'EBADF' });
    } finally {
      closeSync(readOnly);
    }
  });
});
