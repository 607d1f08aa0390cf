import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArtifactStore } from '../../../src/store/artifact-store.ts';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'berth-artifacts-'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

describe('artifact store', () => {
  it('stores a copied file under its digest with its exact bytes', async () => {
    const bytes = randomBytes(3 * 1024 * 1024 + 7);
    await writeFile(path.join(dir, 'src'), bytes);
    const store = new ArtifactStore(path.join(dir, 'artifacts'));
    const ref = await store.putFile(path.join(dir, 'src'));
    expect(ref).toEqual({ digest: sha(bytes), size: bytes.length });
    expect((await readFile(store.pathOf(ref.digest))).equals(bytes)).toBe(true);
    expect(await store.has(ref)).toBe(true);
  });

  it('publishes streamed chunks and reads back a byte range', async () => {
    const store = new ArtifactStore(path.join(dir, 'artifacts'));
    const parts = [Buffer.from([0, 255, 10]), Buffer.from([13, 0, 1])];
    const ref = await store.putChunks(parts);
    expect(ref).toEqual({ digest: sha(Buffer.concat(parts)), size: 6 });
    const chunks: Buffer[] = [];
    for await (const c of store.read(ref, 2, 5)) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks)).toEqual(Buffer.from([10, 13, 0]));
  });

  it('putBytes is idempotent and leaves no temporary files', async () => {
    const store = new ArtifactStore(path.join(dir, 'artifacts'));
    const a = await store.putBytes(Buffer.from('hello'));
    const b = await store.putBytes(Buffer.from('hello'));
    expect(a).toEqual(b);
    const top = await readdir(path.join(dir, 'artifacts'));
    expect(top.filter((n) => n.startsWith('.tmp-'))).toEqual([]);
  });

  it('refuses a path that is not a digest', () => {
    const store = new ArtifactStore(dir);
    expect(() => store.pathOf('../../etc/passwd')).toThrow(/not an artifact digest/);
  });
});
