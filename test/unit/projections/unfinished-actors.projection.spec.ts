/**
 * The unfinished-actors index and the recovery that reads it: a start rehydrates exactly the actors in flight, read
 * stream by stream, and never scans the log (with history behind them, a scan costs the history).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../../src/actors/actor-runtime.ts';
import { ProjectionEngine } from '../../../src/projections/projection-engine.ts';
import { SqliteReadModelStore } from '../../../src/projections/sqlite-read-model-store.ts';
import { unfinishedActorsProjection } from '../../../src/projections/unfinished-actors.projection.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { CountingEventStore } from '../../fixtures/actors/counting-event-store.ts';
import { tallyActor } from '../../fixtures/actors/tally.actor.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-unfinished-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

async function runtimeOn(store: SqliteEventStore | CountingEventStore, runtimeId: string) {
  const actors = new ActorRuntime({ store, runtimeId, snapshotEvery: 5 }).register(tallyActor);
  await actors.start();
  const models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
  const engine = new ProjectionEngine({ store, models });
  const index = engine.register(unfinishedActorsProjection);
  await engine.start();
  await engine.catchUp();
  return { actors, engine, index, close: async () => (await actors.whenIdle(), await engine.stop(), models.close()) };
}

describe('unfinished actors', () => {
  it('should list only actors not in a final state, and let recovery rehydrate exactly those without a log scan', async () => {
    const store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
    const first = await runtimeOn(store, 'rt_first');
    for (let i = 0; i < 30; i++) {
      for (let n = 0; n < 7; n++) await first.actors.send('tally', `t${i}`, { type: 'tally.added', n });
      if (i % 3 !== 0) await first.actors.send('tally', `t${i}`, { type: 'tally.closed' });
    }
    await first.engine.catchUp();
    const open = Array.from({ length: 10 }, (_, k) => `tally-t${k * 3}`);
    // Snapshots (every 5 events) and the epoch fence are streams too, but not actors.
    expect(first.index.query.streams('rt_first').sort()).toEqual([...open].sort());
    await first.close();
    await store.close();

    const counting = new CountingEventStore(SqliteEventStore.open(join(dir, 'events.sqlite3')));
    // The same runtime started again (a restart keeps its runtime id): it owns, and so recovers, the open actors.
    const second = await runtimeOn(counting, 'rt_first');
    const scanned = counting.readAllEvents;
    const report = await second.actors.recover(second.index.query.streams('rt_first'));
    expect(report).toMatchObject({ actors: 10, recovered: 10, failed: 0 });
    // Recovery read no page of the log, and of the streams only the open actors' (and their snapshots').
    expect(counting.readAllEvents).toBe(scanned);
    expect([...counting.streamReads.keys()].filter((s) => s.startsWith('tally-')).sort()).toEqual([...open].sort());
    // Each rehydrated from its snapshot: 7 events, a snapshot at 5, so at most the 2 after it.
    for (const s of open) expect(counting.streamReads.get(s)).toBeLessThanOrEqual(2);
    // Another runtime on the same store owns none of them: its recovery list is empty.
    expect(second.index.query.streams('rt_other')).toEqual([]);
    expect((second.index.query.ownedBy('rt_first') as { stream: string }[]).map((a) => a.stream).sort()).toEqual([...open].sort());
    await second.close();
    await counting.close();
  });

  it('should list an actor no runtime has written for every runtime, beside the actors each owns', async () => {
    const store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
    const rt = await runtimeOn(store, 'rt_a');
    await rt.actors.send('tally', 'mine', { type: 'tally.added', n: 1 });
    // Imported by hand: the runtime's metadata but no writer.
    await store.append('tally-imported', [{ id: randomUUID(), type: 'tally.added', data: { n: 2 }, metadata: { actorType: 'tally', finished: false } }], {
      expectedRevision: 'no_stream',
    });
    await rt.engine.catchUp();
    expect(rt.index.query.streams('rt_a').sort()).toEqual(['tally-imported', 'tally-mine']);
    expect(rt.index.query.streams('rt_b')).toEqual(['tally-imported']);
    await rt.close();
    await store.close();
  });
});
