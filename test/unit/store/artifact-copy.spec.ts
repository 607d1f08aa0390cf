/**
 * Publishing a local file's first `size` bytes through the copy worker (ArtifactStore.putFilePrefix): the same
 * artifact, byte for byte and digest, as hashing in process (putChunks); only `size` bytes taken; an existing
 * artifact kept; a short file, a missing file or a dead worker fail the save and publish nothing.
 */
import { randomBytes } from 'node:crypto';
import { appendFile, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArtifactCopier } from '../../../src/store/artifact-copy.ts';
import { ArtifactStore } from '../../../src/store/artifact-store.ts';

const MiB = 1024 * 1024;
let dir: string;
const copier = new ArtifactCopier();
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'berth-artifact-copy-'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));
afterAll(() => copier.close());

async function source(bytes: Buffer): Promise<string> {
  const file = path.join(dir, 'spool');
  await writeFile(file, bytes);
  return file;
}

/** Every file left in the store: published artifacts and any temporary file. */
async function files(root: string): Promise<string[]> {
  const found = await readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return found.filter((e) => e.isFile()).map((e) => e.name);
}

describe('putFilePrefix (the copy worker)', () => {
  it.each([0, 1, 4 * MiB + 1])('publishes %i bytes as hashing in process does', async (size) => {
    const bytes = randomBytes(size);
    const worker = new ArtifactStore(path.join(dir, 'by-worker'), copier);
    const inProcess = new ArtifactStore(path.join(dir, 'in-process'));
    const ref = await worker.putFilePrefix(await source(bytes), size);
    expect(ref).toEqual(await inProcess.putChunks([bytes]));
    expect((await readFile(worker.pathOf(ref.digest))).equals(bytes)).toBe(true);
    expect((await stat(worker.pathOf(ref.digest))).mode & 0o777).toBe(0o444);
    expect((await files(worker.root)).filter((n) => n.startsWith('.tmp-'))).toEqual([]);
  });

  // A stray writer appends past the drained size: a little (the whole file is copied by the kernel, then cut) or a
  // lot (only `size` bytes are copied).
  it.each([100, 3 * MiB])('takes only `size` bytes of a file %i bytes longer', async (excess) => {
    const size = 4 * MiB + 1;
    const bytes = randomBytes(size + excess);
    const store = new ArtifactStore(path.join(dir, 'artifacts'), copier);
    const ref = await store.putFilePrefix(await source(bytes), size);
    expect(ref).toEqual(await new ArtifactStore(path.join(dir, 'in-process')).putBytes(bytes.subarray(0, size)));
    expect((await readFile(store.pathOf(ref.digest))).equals(bytes.subarray(0, size))).toBe(true);
  });

  it('keeps an artifact that exists already and leaves no temporary file', async () => {
    const bytes = randomBytes(2 * MiB);
    const store = new ArtifactStore(path.join(dir, 'artifacts'), copier);
    const file = await source(bytes);
    const first = await store.putFilePrefix(file, bytes.length);
    const before = await stat(store.pathOf(first.digest));
    const again = await store.putFilePrefix(file, bytes.length);
    const after = await stat(store.pathOf(again.digest));
    expect(again).toEqual(first);
    // The same file, its mtime renewed: retention keeps an artifact published since its cutoff.
    expect(after.ino).toBe(before.ino);
    expect(after.mtimeMs).toBeGreaterThanOrEqual(before.mtimeMs);
    expect(await files(store.root)).toEqual([first.digest.slice(7)]);
  });

  it('fails and publishes nothing when the file holds fewer than `size` bytes', async () => {
    const store = new ArtifactStore(path.join(dir, 'artifacts'), copier);
    const file = await source(randomBytes(MiB));
    await expect(store.putFilePrefix(file, MiB + 1)).rejects.toThrow(`holds ${MiB} of ${MiB + 1} bytes`);
    await expect(store.putFilePrefix(path.join(dir, 'absent'), 1)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await files(store.root)).toEqual([]);
    // The worker lives on: the next copy succeeds.
    await appendFile(file, Buffer.alloc(1));
    expect((await store.putFilePrefix(file, MiB + 1)).size).toBe(MiB + 1);
  });

  it('fails the save when the worker dies during the copy, and a new worker takes the next one', async () => {
    const own = new ArtifactCopier();
    const store = new ArtifactStore(path.join(dir, 'artifacts'), own);
    const bytes = randomBytes(64 * MiB);
    const file = await source(bytes);
    const saving = store.putFilePrefix(file, bytes.length);
    // Killed once its copy has begun (the temporary file exists).
    while (!(await files(store.root)).some((n) => n.startsWith('.tmp-'))) await new Promise((r) => setTimeout(r, 1));
    await own.close();
    await expect(saving).rejects.toThrow(/worker exited/);
    expect(await files(store.root)).toEqual([]);
    const ref = await store.putFilePrefix(file, bytes.length);
    expect(ref).toEqual(await new ArtifactStore(path.join(dir, 'in-process')).putBytes(bytes));
    await own.close();
  });
});
