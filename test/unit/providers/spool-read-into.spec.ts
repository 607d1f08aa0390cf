/** Spool.read into a caller's buffer (followers and the save reuse theirs): bounded by it, a view of it, same bytes. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Spool } from '../../../src/providers/spool.ts';

describe('Spool.read into a buffer', () => {
  let root: string;
  let spool: Spool;
  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-spool-into-'));
    spool = new Spool(join(root, 'spool'));
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('fills the given buffer, at most its length, and answers a view of it', async () => {
    await spool.prepare('op');
    writeFileSync(spool.file('op', 'stdout'), 'abcdefghij');
    const into = Buffer.alloc(4);
    const read = await spool.read('op', 'stdout', 3, 100, into);
    expect(read.data.toString()).toBe('defg');
    expect(read.data.buffer).toBe(into.buffer);
    expect(read).toMatchObject({ next: 7, closed: false });
    const tail = await spool.read('op', 'stdout', 8, 100, into);
    expect(tail.data.toString()).toBe('ij');
    expect(tail.next).toBe(10);
  });
});
