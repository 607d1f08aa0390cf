/**
 * Ownership on a shared store (issue #17, src/actors/ownership.ts): two runtimes with their own ids on one SQLite
 * file; each writes only its own actors, recovers only its own, and takes another's over only by adoption, which
 * fences the old owner at its next append.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../../src/actors/actor-runtime.ts';
import { checkHistory } from '../../../src/actors/history-check.ts';
import { snapshotStreamOf } from '../../../src/actors/snapshot-stream.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { counterActor, type CounterServices } from '../../fixtures/actors/counter.actor.ts';

let dir: string;
const closing: (() => Promise<unknown>)[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-ownership-'));
});

afterEach(async () => {
  for (const close of closing.splice(0)) await close();
  rmSync(dir, { recursive: true, force: true });
});

/** A runtime on its own connection to the shared file, as another process would have. */
async function runtime(runtimeId: string, snapshotEvery = 50) {
  const store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
  const services: CounterServices = { inspected: [] };
  const rt = new ActorRuntime<CounterServices>({ store, runtimeId, services, snapshotEvery }).register(counterActor);
  closing.push(async () => {
    await rt.whenIdle();
    await store.close();
  });
  await rt.start();
  return { rt, store, services };
}

const inc = (by: number) => ({ type: 'counter.incremented', by });

describe('actor ownership on a shared store', () => {
  it('refuses a command on an actor another runtime owns, writing nothing', async () => {
    const a = await runtime('rt-a');
    const b = await runtime('rt-b');
    await a.rt.send('counter', 'c1', inc(1));
    await expect(b.rt.send('counter', 'c1', inc(2))).rejects.toMatchObject({
      code: 'owned_elsewhere',
      detail: { stream: 'counter-c1', runtimeId: 'rt-a' },
    });
    const events = await a.store.readStream('counter-c1');
    expect(events.map((e) => e.metadata.runtimeId)).toEqual(['rt-a']);
    expect((await b.rt.get('counter', 'c1'))?.owner).toBe('rt-a');
  });

  it('recovers only its own unfinished actors', async () => {
    const a = await runtime('rt-a');
    const b = await runtime('rt-b');
    await a.rt.send('counter', 'mine-a', inc(1));
    await b.rt.send('counter', 'mine-b', inc(1));
    const report = await b.rt.recover(['counter-mine-a', 'counter-mine-b']);
    expect(report.recovered).toBe(1);
    await b.rt.whenIdle();
    expect(b.services.inspected.map((x) => x.id)).toEqual(['mine-b']);
    const scanned = await b.rt.recover();
    expect(scanned.recovered).toBe(1);
    expect((await a.store.readStream('counter-mine-a')).every((e) => e.metadata.runtimeId === 'rt-a')).toBe(true);
  });

  it('adopts at the exact revision; the old owner, still alive, then appends nothing and runs no effect', async () => {
    const a = await runtime('rt-a');
    const b = await runtime('rt-b');
    await a.rt.send('counter', 'c1', inc(5)); // a caches the actor at revision 0
    expect(await b.rt.adopt('counter', 'c1', 'rt-a')).toBe(true);
    // Crossing ten would yield the `announce` effect: a may not decide it any more.
    await expect(a.rt.send('counter', 'c1', inc(6))).rejects.toMatchObject({ code: 'owned_elsewhere', detail: { runtimeId: 'rt-b' } });
    await a.rt.whenIdle();
    const events = await a.store.readStream('counter-c1');
    expect(events.map((e) => [e.type, e.metadata.runtimeId])).toEqual([
      ['counter.incremented', 'rt-a'],
      ['actor.adopted', 'rt-b'],
    ]);
    expect(events[1].data).toMatchObject({ from: 'rt-a', to: 'rt-b', epoch: 1 });
    // The adopter writes it, and recovers it, from now on.
    const sent = await b.rt.send('counter', 'c1', inc(6));
    expect(sent.context.count).toBe(11);
    await b.rt.whenIdle();
    expect((await b.rt.get('counter', 'c1'))?.context.announced).toEqual([11]);
    expect((await b.rt.recover(['counter-c1'])).recovered).toBe(1);
    expect((await a.rt.recover(['counter-c1'])).recovered).toBe(0);
  });

  it('adopts nothing that the named runtime does not own, and twice is once', async () => {
    const a = await runtime('rt-a');
    const b = await runtime('rt-b');
    const c = await runtime('rt-c');
    await a.rt.send('counter', 'c1', inc(1));
    expect(await c.rt.adopt('counter', 'c1', 'rt-x')).toBe(false);
    expect(await c.rt.adopt('counter', 'nothing', 'rt-a')).toBe(false);
    const adopted = await Promise.all([b.rt.adopt('counter', 'c1', 'rt-a'), c.rt.adopt('counter', 'c1', 'rt-a')]);
    expect(adopted.filter(Boolean)).toHaveLength(1);
    const events = await a.store.readStream('counter-c1');
    expect(events.filter((e) => e.type === 'actor.adopted')).toHaveLength(1);
    expect(await b.rt.adopt('counter', 'c1', 'rt-a')).toBe(adopted[0]);
  });

  it('keeps the owner through snapshots, and the history check passes over adoptions', async () => {
    const a = await runtime('rt-a', 2);
    await a.rt.send('counter', 'c1', inc(1));
    await a.rt.send('counter', 'c1', inc(1));
    await a.rt.whenIdle();
    const [snapshot] = await a.store.readStream(snapshotStreamOf('counter-c1'), { direction: 'backwards', maxCount: 1 });
    expect(snapshot.data).toMatchObject({ owner: 'rt-a' });
    // A fresh runtime loads the actor from that snapshot with nothing after it: the owner comes from the snapshot.
    const b = await runtime('rt-b');
    await expect(b.rt.send('counter', 'c1', inc(1))).rejects.toMatchObject({ code: 'owned_elsewhere' });
    expect(await b.rt.adopt('counter', 'c1', 'rt-a')).toBe(true);
    await b.rt.send('counter', 'c1', inc(1));
    const report = await checkHistory(b.store, [counterActor]);
    expect(report.problems).toEqual([]);
    expect(report.events).toBe(4);
  });

  it("answers a cached actor from memory only until another runtime writes: then its view has the other's events", async () => {
    const a = await runtime('rt-a');
    const b = await runtime('rt-b');
    await b.rt.send('counter', 'c1', inc(1));
    expect((await a.rt.get('counter', 'c1'))?.context).toMatchObject({ count: 1 }); // read, cached at its revision
    const reads = { n: 0 };
    const readStream = a.store.readStream.bind(a.store);
    a.store.readStream = (...args) => (reads.n++, readStream(...args));
    expect((await a.rt.get('counter', 'c1'))?.context).toMatchObject({ count: 1 });
    expect(reads.n).toBe(0); // nothing written since: answered as cached
    await b.rt.send('counter', 'c1', inc(2)); // through b's own connection: a's store sees the revision move
    const seen = await a.rt.get('counter', 'c1');
    expect(seen).toMatchObject({ revision: 1n, context: { count: 3 } });
    expect(reads.n).toBeGreaterThan(0);
  });

  it('answers a cached actor without reading its stream after writes to other streams, and reads it after a write to its own', async () => {
    const a = await runtime('rt-a');
    const b = await runtime('rt-b');
    await a.rt.send('counter', 'c1', inc(1));
    await a.rt.get('counter', 'c1');
    const reads = { n: 0 };
    const readStream = a.store.readStream.bind(a.store);
    a.store.readStream = (...args) => (reads.n++, readStream(...args));
    await a.rt.send('counter', 'c2', inc(5)); // this runtime's own write elsewhere
    await b.rt.send('counter', 'c3', inc(7)); // another runtime's write elsewhere
    reads.n = 0;
    expect(await a.rt.get('counter', 'c1')).toMatchObject({ revision: 0n, context: { count: 1 } });
    expect(reads.n).toBe(0);
    await b.rt.adopt('counter', 'c1', 'rt-a');
    await b.rt.send('counter', 'c1', inc(2)); // its own stream, by the other runtime
    expect(await a.rt.get('counter', 'c1')).toMatchObject({ revision: 2n, owner: 'rt-b', context: { count: 3 } });
    expect(reads.n).toBeGreaterThan(0);
  });
});

