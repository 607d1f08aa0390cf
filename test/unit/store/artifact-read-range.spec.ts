/** ArtifactStore.readRange: a byte range in one buffer (a caller's, when given), short only at the artifact's end. */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArtifactStore } from '../../../src/store/artifact-store.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'berth-artifact-range-'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

describe('artifact store readRange', () => {
  it('reads a range into a new buffer, or into the caller buffer bounded by its length', async () => {
    const store = new ArtifactStore(path.join(dir, 'artifacts'));
    const bytes = randomBytes(3 * 1024 * 1024 + 5);
    const ref = await store.putBytes(bytes);

    expect((await store.readRange(ref, 1000, 2 * 1024 * 1024)).equals(bytes.subarray(1000, 1000 + 2 * 1024 * 1024))).toBe(true);

    const into = Buffer.alloc(64 * 1024);
    const read = await store.readRange(ref, 7, 1024 * 1024, into);
    expect(read.buffer).toBe(into.buffer); // a view of the caller's buffer, not a copy
    expect(read.equals(bytes.subarray(7, 7 + into.length))).toBe(true);
  });

  it('is short at the end and empty past it', async () => {
    const store = new ArtifactStore(path.join(dir, 'artifacts'));
    const bytes = randomBytes(100);
    const ref = await store.putBytes(bytes);
    expect((await store.readRange(ref, 90, 50)).equals(bytes.subarray(90))).toBe(true);
    expect((await store.readRange(ref, 100, 50)).length).toBe(0);
    expect((await store.readRange(ref, 500, 50)).length).toBe(0);
  });
});
