/**
 * ArtifactStore.expire, retention's rule for content-addressed files (real files): an artifact goes only when no
 * holder published its bytes since the cutoff, the empty artifact never goes, and a publish that meets a removal in
 * progress ends with the artifact in place.
 */
import { mkdtempSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArtifactStore } from '../../../src/store/artifact-store.ts';

let dir: string;
let store: ArtifactStore;
const HOUR = 3_600_000;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-artifact-retention-'));
  store = new ArtifactStore(join(dir, 'artifacts'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Publishes `text` and dates its file `ageMs` back, as if saved then. */
async function savedAgo(text: string, ageMs: number) {
  const ref = await store.putBytes(Buffer.from(text));
  const then = new Date(Date.now() - ageMs);
  utimesSync(store.pathOf(ref.digest), then, then);
  return ref;
}

describe('artifact retention', () => {
  it('should remove an artifact last published before the cutoff', async () => {
    const ref = await savedAgo('old output\n', 2 * HOUR);
    expect(await store.expire(ref, Date.now() - HOUR)).toBe('removed');
    expect(await store.has(ref)).toBe(false);
    // Already gone (a pass that crashed before compacting): still done.
    expect(await store.expire(ref, Date.now() - HOUR)).toBe('removed');
  });

  it('should keep an artifact another holder published since the cutoff', async () => {
    const ref = await savedAgo('shared output\n', 2 * HOUR);
    await store.putBytes(Buffer.from('shared output\n')); // a newer execution saved the same bytes
    expect(await store.expire(ref, Date.now() - HOUR)).toBe('kept');
    expect(await store.has(ref)).toBe(true);
  });

  it('should keep the empty artifact every empty stream shares', async () => {
    const ref = await savedAgo('', 2 * HOUR);
    expect(await store.expire(ref, Date.now() - HOUR)).toBe('kept');
    expect(await store.has(ref)).toBe(true);
  });

  it('should leave the artifact in place when a publish of the same bytes races a removal', async () => {
    for (let i = 0; i < 20; i++) {
      const text = `raced output ${i}\n`;
      const ref = await savedAgo(text, 2 * HOUR);
      const [outcome] = await Promise.all([store.expire(ref, Date.now() - HOUR), store.putBytes(Buffer.from(text))]);
      expect(['removed', 'kept']).toContain(outcome);
      expect(await store.has(ref), `round ${i}: ${outcome}`).toBe(true);
      expect((await store.readRange(ref, 0, 100)).toString()).toBe(text);
    }
  });
});
