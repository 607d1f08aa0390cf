/**
 * The follower's per-stream reader: read sizes grow while reads come back full and shrink when one does not, reads
 * made ahead are the ones taken (and dropped after a short read), and large reads take turns in a few buffers without
 * ever handing out a buffer a read is still filling. The reads are served from a real byte source by cursor, as the
 * runtime's readOutput does.
 */
import { describe, expect, it } from 'vitest';
import type { OutputRead } from '../../../src/runtime/runtime-api.ts';
import { StreamReader, type ReadAt } from '../../../src/gateway/stream-reader.ts';

const KiB = 1024;

/** A stream of `size` bytes (byte i = i % 251) read by cursor; records every read asked for. */
function source(size: number) {
  const bytes = Buffer.alloc(size);
  for (let i = 0; i < size; i++) bytes[i] = i % 251;
  const asked: { cursor: number; maxBytes: number; into?: Buffer }[] = [];
  let available = size;
  const readAt: ReadAt = async (cursor, maxBytes, into) => {
    asked.push({ cursor, maxBytes, into });
    await new Promise((resolve) => setImmediate(resolve));
    const n = Math.max(0, Math.min(maxBytes, into?.length ?? maxBytes, available - cursor));
    const data = into ? into.subarray(0, n) : Buffer.alloc(n);
    bytes.copy(data, 0, cursor, cursor + n);
    const read: OutputRead = { data, next: cursor + n, closed: cursor + n >= size, complete: false };
    return read;
  };
  return { bytes, asked, readAt, setAvailable: (n: number) => (available = n) };
}

describe('StreamReader', () => {
  it('doubles reads while they come back full, up to the maximum, and gives every byte in order', async () => {
    const src = source(64 * KiB);
    const reader = new StreamReader(src.readAt, 4 * KiB, 16 * KiB);
    const got: Buffer[] = [];
    for (let cursor = 0; cursor < 64 * KiB; ) {
      const read = await reader.next(cursor);
      got.push(Buffer.from(read.data)); // copied: the reader reuses its buffers
      cursor = read.next;
    }
    expect(Buffer.concat(got).equals(src.bytes)).toBe(true);
    expect(src.asked.map((a) => a.maxBytes)).toEqual([4 * KiB, 8 * KiB, 16 * KiB, 16 * KiB, 16 * KiB, 16 * KiB]);
  });

  it('drops the reads made ahead of a short one, and reads on from where it ended', async () => {
    const src = source(64 * KiB);
    src.setAvailable(10 * KiB);
    const reader = new StreamReader(src.readAt, 4 * KiB, 16 * KiB);
    let cursor = 0;
    const got: Buffer[] = [];
    for (let i = 0; i < 6; i++) {
      const read = await reader.next(cursor);
      got.push(Buffer.from(read.data));
      cursor = read.next;
      if (read.data.length > 0) reader.readAhead(cursor);
      if (i === 2) src.setAvailable(64 * KiB);
    }
    expect(Buffer.concat(got).equals(src.bytes.subarray(0, cursor))).toBe(true);
    expect(cursor).toBeGreaterThan(10 * KiB);
  });

  it('falls back to one chunk after a read that is not full', async () => {
    const src = source(64 * KiB);
    src.setAvailable(20 * KiB);
    const reader = new StreamReader(src.readAt, 4 * KiB, 16 * KiB);
    let cursor = 0;
    for (let i = 0; i < 4; i++) cursor = (await reader.next(cursor)).next; // 4 + 8 + 8 (short) + 0
    expect(src.asked.map((a) => a.maxBytes)).toEqual([4 * KiB, 8 * KiB, 16 * KiB, 4 * KiB]);
    expect(cursor).toBe(20 * KiB);
  });

  it('takes the reads made ahead, and rotates depth + 1 buffers that are never filled while handed out', async () => {
    const src = source(256 * KiB);
    const reader = new StreamReader(src.readAt, 4 * KiB, 16 * KiB, 2);
    const buffers = new Set<ArrayBufferLike>();
    let cursor = 0;
    while (cursor < 256 * KiB) {
      const read = await reader.next(cursor);
      const expected = Buffer.from(src.bytes.subarray(cursor, read.next));
      cursor = read.next;
      if (!read.closed) reader.readAhead(cursor);
      await new Promise((resolve) => setTimeout(resolve, 1)); // the read ahead lands while these bytes are held
      expect(read.data.equals(expected)).toBe(true);
      if (read.data.length === 16 * KiB) buffers.add(read.data.buffer);
    }
    expect(new Set(src.asked.map((a) => a.cursor)).size).toBe(src.asked.length); // no cursor read twice
    expect(buffers.size).toBe(3); // the one handed out and two reads under way (depth 2)
  });

  it('never starts reads beyond the budget it is given, the reads made ahead included', async () => {
    const src = source(256 * KiB);
    const reader = new StreamReader(src.readAt, 4 * KiB, 16 * KiB);
    let cursor = 0;
    for (const budget of [16 * KiB, 6 * KiB, 40 * KiB, 2 * KiB, 16 * KiB, 0]) {
      const before = src.asked.length;
      const read = await reader.next(cursor, budget); // a read made ahead is taken as it is: its bytes are in memory
      expect(src.asked.slice(before).every((a) => a.maxBytes <= Math.max(1, budget))).toBe(true);
      cursor = read.next;
      const beforeAhead = src.asked.length;
      reader.readAhead(cursor, budget - read.data.length);
      const ahead = src.asked.slice(beforeAhead);
      expect(ahead.reduce((sum, a) => sum + a.maxBytes, 0)).toBeLessThanOrEqual(Math.max(0, budget - read.data.length));
      expect(ahead.every((a) => a.maxBytes >= 4 * KiB)).toBe(true); // none smaller than a chunk
    }
  });
});
