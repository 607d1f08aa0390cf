/**
 * Recovery from an index reads each window's streams together (`readStreams`): every actor it reports must be the
 * actor `rehydrate` loads alone, from its snapshot, and a corrupt event (one that fails its schema, or a row that is
 * not JSON and so fails the whole read) is still reported against its own actor while the others load.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ActorRuntime } from '../../../src/actors/actor-runtime.ts';
import { loadListed } from '../../../src/actors/recovery-scan.ts';
import { rehydrate } from '../../../src/actors/rehydrate.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { CountingEventStore } from '../../fixtures/actors/counting-event-store.ts';
import { tallyActor } from '../../fixtures/actors/tally.actor.ts';

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-load-listed-'));
  file = join(dir, 'events.sqlite3');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

it('loads listed actors as rehydrate does, from their snapshots, and reports each corrupt one on its own', async () => {
  const writer = SqliteEventStore.open(file);
  const rt = new ActorRuntime({ store: writer, runtimeId: 'before', snapshotEvery: 5 }).register(tallyActor);
  await rt.start();
  const ids = Array.from({ length: 300 }, (_, i) => `t${i}`);
  for (let n = 1; n <= 7; n++) await Promise.all(ids.map((id) => rt.send('tally', id, { type: 'tally.added', n })));
  await rt.whenIdle();
  await writer.close();
  const raw = new Database(file);
  raw.prepare(`UPDATE events SET data = '{"n":"seven"}' WHERE stream = 'tally-t3' AND revision = 6`).run();
  raw.prepare(`UPDATE events SET data = '{' WHERE stream = 'tally-t290' AND revision = 6`).run();
  raw.close();

  const store = new CountingEventStore(SqliteEventStore.open(file));
  const listed = [...ids.map((id) => `tally-${id}`), 'unregistered-x'];
  const result = await loadListed(store, [tallyActor], listed, 256);
  expect(Object.fromEntries(result.failed.map((f) => [f.stream, (f.error as { code?: string }).code]))).toEqual({
    'tally-t3': 'corrupt_event',
    'tally-t290': 'corrupt_event',
  });
  expect(result.unfinished).toHaveLength(298);
  for (const a of result.unfinished) {
    const alone = await rehydrate(store.inner, tallyActor, a.id);
    expect(a.loaded.revision).toBe(6n);
    expect(a.loaded.snapshot.context).toEqual(alone.snapshot.context);
    expect(a.loaded.snapshot.context).toEqual({ total: 28, recoveries: 0 });
  }
  // From the snapshot at revision 4: the two events after it, not all seven.
  for (const id of ['t0', 't299']) expect(store.streamReads.get(`tally-${id}`)).toBe(2);
  await store.close();
});
