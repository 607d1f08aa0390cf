/**
 * The recovery scan folds each page's events at the page's end: with pages of three events every actor's history
 * spans pages, snapshots land between them, and an actor may finish or come back in a later page. Whatever the
 * paging, each actor it reports must be the actor `rehydrate` loads from its stream alone, and only an actor whose
 * events in the log do not follow on from its state (here: one that came back after finishing) is read again.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ActorRuntime } from '../../../src/actors/actor-runtime.ts';
import { scanUnfinished } from '../../../src/actors/recovery-scan.ts';
import { rehydrate } from '../../../src/actors/rehydrate.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { CountingEventStore } from '../../fixtures/actors/counting-event-store.ts';
import { tallyActor } from '../../fixtures/actors/tally.actor.ts';

let dir: string;
let store: SqliteEventStore;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-recovery-scan-'));
  store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const add = (n: number) => ({ type: 'tally.added', n });

it('reports each unfinished actor as rehydrate loads it, whatever page its events and snapshots fall in', async () => {
  const rt = new ActorRuntime({ store, runtimeId: 'scan', snapshotEvery: 4 }).register(tallyActor);
  await rt.start();
  // Interleaved so that every page holds events of several actors and each history spans many pages.
  for (let i = 1; i <= 9; i++) {
    await Promise.all([
      rt.send('tally', 'long', add(i)),
      i <= 3 ? rt.send('tally', 'short', add(i)) : undefined,
      i <= 5 ? rt.send('tally', 'done', add(i)) : undefined,
      i <= 4 ? rt.send('tally', 'reopened', add(i)) : undefined,
    ]);
  }
  await rt.send('tally', 'done', { type: 'tally.closed' });
  await rt.send('tally', 'reopened', { type: 'tally.closed' });
  await rt.whenIdle();
  // An event after a finished one (as another writer could leave it): its events up to here are not enough.
  await store.append('tally-reopened', [{ id: randomUUID(), type: 'tally.added', data: { n: 100 }, metadata: { finished: false } }], {
    expectedRevision: 'any',
  });

  for (const pageSize of [1, 2, 3, 7, 10_000]) {
    const counting = new CountingEventStore(store);
    const scan = await scanUnfinished(counting, [tallyActor], pageSize);
    expect(scan.failed).toEqual([]);
    expect([...counting.streamReads.keys()]).toEqual(['tally-reopened']);
    const found = Object.fromEntries(scan.unfinished.map((a) => [a.id, a.loaded]));
    expect(Object.keys(found).sort()).toEqual(['long', 'reopened', 'short']);
    for (const id of ['long', 'short', 'reopened']) {
      const expected = await rehydrate(store, tallyActor, id);
      expect({ id, pageSize, revision: found[id].revision, context: found[id].snapshot.context }).toEqual({
        id,
        pageSize,
        revision: expected.revision,
        context: expected.snapshot.context,
      });
    }
  }
  expect(rt.stats.snapshots).toBeGreaterThan(0);
});
