import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActorRuntime, type ActorRuntimeOptions } from '../../../src/actors/actor-runtime.ts';
import { decisionEventId } from '../../../src/actors/event-id.ts';
import { runtimeStreamOf } from '../../../src/actors/epoch-fence.ts';
import { snapshotStreamOf } from '../../../src/actors/snapshot-stream.ts';
import { restartCheck } from '../../../src/actors/testing.ts';
import { CorruptEvent, isWrongExpectedVersion, type EventStore } from '../../../src/store/event-store.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { counterActor, type CounterServices } from '../../fixtures/actors/counter.actor.ts';
import { CountingEventStore } from '../../fixtures/actors/counting-event-store.ts';

let dir: string;
let file: string;
let store: SqliteEventStore;
const opened: EventStore[] = [];
const runtimes: ActorRuntime<any>[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-actors-'));
  file = join(dir, 'events.sqlite3');
  store = SqliteEventStore.open(file);
  opened.push(store);
});

afterEach(async () => {
  await Promise.all(runtimes.splice(0).map((rt) => rt.whenIdle()));
  await Promise.all(opened.splice(0).map((s) => s.close()));
  rmSync(dir, { recursive: true, force: true });
});

function runtime(opts: Partial<ActorRuntimeOptions<CounterServices>> = {}) {
  const services: CounterServices = { inspected: [] };
  const rt = new ActorRuntime<CounterServices>({ store, runtimeId: 'rt-a', services, ...opts });
  rt.register(counterActor);
  runtimes.push(rt);
  return rt;
}

async function started(opts: Partial<ActorRuntimeOptions<CounterServices>> = {}) {
  const rt = runtime(opts);
  await rt.start();
  return rt;
}

const inc = (by: number) => ({ type: 'counter.incremented', by });

/** Appends hand-made events, as an older version of Berth (or a corrupted file) would have left them. */
async function appendRaw(stream: string, events: { type: string; data: unknown; schemaVersion?: number }[]) {
  const revision = await store.streamRevision(stream);
  const first = revision === 'no_stream' ? 0n : revision + 1n;
  await store.append(
    stream,
    events.map((e, i) => ({
      id: decisionEventId(stream, first + BigInt(i), { runtimeId: 'raw', epoch: 0 }, e.type, e.data),
      type: e.type,
      data: e.data,
      metadata: { schemaVersion: e.schemaVersion ?? 2 },
    })),
    { expectedRevision: revision },
  );
}

describe('ActorRuntime: deciding and appending', () => {
  it('appends one event per accepted command, with its data and metadata', async () => {
    const rt = await started();
    const res = await rt.send('counter', 'c1', inc(3), { correlationId: 'corr-1' });
    expect(res.revision).toBe(0n);
    expect(res.state).toBe('open');
    expect(res.context.count).toBe(3);

    const [stored] = await store.readStream('counter-c1');
    expect(stored.id).toBe(res.eventId);
    expect(stored.type).toBe('counter.incremented');
    expect(stored.data).toEqual({ by: 3 });
    expect(stored.position).toBe(res.position);
    expect(stored.metadata).toMatchObject({
      runtimeId: 'rt-a',
      epoch: 1,
      correlationId: 'corr-1',
      causationId: res.eventId,
      actorType: 'counter',
      from: 'open',
      to: 'open',
      schemaVersion: 2,
      finished: false,
    });
    expect(typeof stored.metadata.at).toBe('number');
  });

  it('refuses an event the state does not accept with the typed rejection, and writes nothing', async () => {
    const rt = await started();
    await rt.send('counter', 'small-1', inc(5));
    const head = await store.headPosition();
    await expect(rt.send('counter', 'small-1', inc(1))).rejects.toMatchObject({
      code: 'invalid_request',
      detail: { count: 5, limit: 5 },
    });
    await rt.send('counter', 'small-1', { type: 'counter.closed' });
    await expect(rt.send('counter', 'small-1', inc(1))).rejects.toMatchObject({ code: 'invalid_state' });
    expect(await store.streamRevision('counter-small-1')).toBe(1n);
    expect(await store.headPosition()).toBe(head + 1n);
    expect(rt.stats.rejected).toBe(2);
  });

  it('refuses an event that fails its schema, or that the type does not know, before any write', async () => {
    const rt = await started();
    const head = await store.headPosition();
    await expect(rt.send('counter', 'c1', inc(0))).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(rt.send('counter', 'c1', { type: 'counter.incremented', by: 'x' })).rejects.toMatchObject({
      code: 'invalid_request',
    });
    await expect(rt.send('counter', 'c1', { type: 'counter.exploded' })).rejects.toMatchObject({ code: 'invalid_request' });
    expect(await store.headPosition()).toBe(head);
    expect(await rt.get('counter', 'c1')).toBeUndefined();
  });

  it('runs effects after the append and appends their outcome with causation and correlation', async () => {
    const rt = await started();
    const res = await rt.send('counter', 'c1', inc(12), { correlationId: 'corr-9' });
    await rt.whenIdle();
    const events = await store.readStream('counter-c1');
    expect(events.map((e) => e.type)).toEqual(['counter.incremented', 'counter.announced']);
    expect(events[1].data).toEqual({ count: 12 });
    expect(events[1].metadata).toMatchObject({ causationId: res.eventId, correlationId: 'corr-9' });
    expect((await rt.get('counter', 'c1'))?.context.announced).toEqual([12]);
  });

  it('serialises commands to one actor and keeps their order', async () => {
    const rt = await started();
    const results = await Promise.all([1, 2, 3, 4, 5, 6].map((by) => rt.send('counter', 'c1', inc(by))));
    expect(results.map((r) => r.revision)).toEqual([0n, 1n, 2n, 3n, 4n, 5n]);
    const events = await store.readStream('counter-c1');
    expect(events.map((e) => (e.data as { by: number }).by)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it('re-decides on the new state when the stream moved under it', async () => {
    const a = await started();
    await a.send('counter', 'c1', inc(1));
    // An event no runtime wrote (an import) lands: rt-a still owns the stream, and its cached state is one behind.
    await appendRaw('counter-c1', [{ type: 'counter.incremented', data: { by: 2 } }]);
    const res = await a.send('counter', 'c1', inc(4));
    expect(res.revision).toBe(2n);
    expect(res.context.count).toBe(7);
    expect(a.stats.wrongExpectedVersion).toBe(1);
  });

  it('refuses to write once a later start of the same runtime wrote the actor (write-time epoch fencing)', async () => {
    const old = await started();
    await old.send('counter', 'c1', inc(1));
    const later = await started(); // epoch 2, as after a restart elsewhere: its recovery touches every unfinished actor
    expect((await later.recover()).recovered).toBe(1);
    await expect(old.send('counter', 'c1', inc(1))).rejects.toMatchObject({ code: 'owned_elsewhere', detail: { runtimeId: 'rt-a', epoch: 2 } });
    expect((await later.send('counter', 'c1', inc(1))).context.count).toBe(2);
  });

  it('refuses to send before start', async () => {
    const rt = runtime();
    await expect(rt.send('counter', 'c1', inc(1))).rejects.toMatchObject({ code: 'unavailable' });
  });
});

describe('ActorRuntime: epochs', () => {
  it('increments the epoch at every start', async () => {
    expect((await runtime().start()).epoch).toBe(1);
    expect((await runtime().start()).epoch).toBe(2);
    const events = await store.readStream(runtimeStreamOf('rt-a'));
    expect(events.map((e) => (e.data as { epoch: number }).epoch)).toEqual([1, 2]);
  });

  it('lets exactly one of two concurrent starts of one runtimeId win', async () => {
    await runtime().start();
    const other = SqliteEventStore.open(file);
    opened.push(other);
    const contenders = [runtime(), new ActorRuntime({ store: other, runtimeId: 'rt-a' })];
    const outcomes = await Promise.allSettled(contenders.map((rt) => rt.start()));
    const won = outcomes.filter((o) => o.status === 'fulfilled');
    const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(isWrongExpectedVersion(lost[0].reason)).toBe(true);
    expect(await store.streamRevision(runtimeStreamOf('rt-a'))).toBe(1n);
  });
});

describe('ActorRuntime: snapshots and rehydration', () => {
  it('writes a snapshot after every N events of an actor', async () => {
    const rt = await started({ snapshotEvery: 5 });
    for (let i = 0; i < 12; i++) await rt.send('counter', 'c1', inc(1));
    await rt.whenIdle();
    const snaps = await store.readStream(snapshotStreamOf('counter-c1'));
    expect(snaps.map((s) => (s.data as { revision: string }).revision)).toEqual(['4', '9']);
    expect((snaps[1].data as { snapshot: { context: { count: number } } }).snapshot.context.count).toBe(10);
  });

  it('rehydrates an actor of 10,000 events from its latest snapshot and the events after it only', async () => {
    const stream = 'counter-big';
    for (let i = 0; i < 9_980; i += 998) {
      await appendRaw(stream, Array.from({ length: 998 }, () => ({ type: 'counter.incremented', data: { by: 1 } })));
    }
    const live = await started({ snapshotEvery: 50 });
    for (let i = 0; i < 27; i++) await live.send('counter', 'big', inc(1)); // the 10,000th event takes a snapshot
    await live.whenIdle();
    const counting = new CountingEventStore(store);
    const view = await restartCheck(
      live,
      () => runtime({ store: counting, runtimeId: 'rt-fresh' }),
      'counter',
      'big',
    );
    expect(view.context.count).toBe(10_007);
    // 27 increments and the announcements of 9,990 and 10,000 after the 9,980 raw events: revision 10,008.
    expect(view.revision).toBe(10_008n);
    expect(counting.streamReads.get(snapshotStreamOf(stream))).toBe(1);
    expect(counting.streamReads.get(stream)).toBe(9); // revisions 10,000..10,008, after the snapshot at 9,999
  });

  it('restores a finished actor from a snapshot as done', async () => {
    const live = await started({ snapshotEvery: 2 });
    await live.send('counter', 'c1', inc(1));
    await live.send('counter', 'c1', { type: 'counter.closed' });
    await live.whenIdle();
    const counting = new CountingEventStore(store);
    const fresh = runtime({ store: counting, runtimeId: 'rt-fresh' });
    expect(await fresh.get('counter', 'c1')).toMatchObject({ state: 'closed', status: 'done', finished: true });
    expect(counting.streamReads.get('counter-c1') ?? 0).toBe(0);
  });

  it('does not restore a snapshot folded by another version of the machine: it folds every event instead', async () => {
    const live = await started({ snapshotEvery: 2 });
    for (let i = 0; i < 4; i++) await live.send('counter', 'v', inc(3));
    await live.whenIdle();
    const [snap] = await store.readStream(snapshotStreamOf('counter-v'), { direction: 'backwards', maxCount: 1 });
    expect((snap.data as { machine?: string }).machine).toMatch(/^[0-9a-f]{16}$/);
    // The same machine with a guard changed (no limit any more): a new version.
    const doubled = counterActor.machine.provide({
      actions: { announce: (_: unknown, _p: { count: number }) => {} },
      guards: { withinLimit: () => true },
    });
    const counting = new CountingEventStore(store);
    const changed = new ActorRuntime<CounterServices>({ store: counting, runtimeId: 'rt-changed', services: { inspected: [] } });
    changed.register({ ...counterActor, machine: doubled });
    runtimes.push(changed);
    expect((await changed.get('counter', 'v'))?.context.count).toBe(12);
    // It read the whole stream from the first event, not the events after the snapshot.
    expect(counting.streamReads.get('counter-v')).toBe((await store.readStream('counter-v')).length);
    // The unchanged machine still starts from its snapshot.
    const same = new CountingEventStore(store);
    const again = runtime({ store: same, runtimeId: 'rt-same' });
    expect((await again.get('counter', 'v'))?.context.count).toBe(12);
    const after = (await store.readStream('counter-v')).length - (Number((snap.data as { revision: string }).revision) + 1);
    expect(same.streamReads.get('counter-v') ?? 0).toBe(after);
  });

  it('snapshots an actor that a changed machine folded from its first event, so its next load starts from there', async () => {
    const live = await started({ snapshotEvery: 2 });
    for (let i = 0; i < 4; i++) await live.send('counter', 'w', inc(2));
    await live.whenIdle();
    const length = (await store.readStream('counter-w')).length;
    const changedMachine = counterActor.machine.provide({ guards: { withinLimit: () => true } });
    const load = async (runtimeId: string) => {
      const counting = new CountingEventStore(store);
      const rt = new ActorRuntime<CounterServices>({ store: counting, runtimeId, services: { inspected: [] }, snapshotEvery: 2 });
      rt.register({ ...counterActor, machine: changedMachine });
      runtimes.push(rt);
      expect((await rt.get('counter', 'w'))?.context.count).toBe(8);
      await rt.whenIdle();
      return counting.streamReads.get('counter-w') ?? 0;
    };
    // The first load of the changed machine folds every event (the snapshots are the old machine's) and snapshots
    // the head with its own version; the next one reads nothing after that snapshot.
    expect(await load('rt-upgraded')).toBe(length);
    expect(await load('rt-upgraded-again')).toBe(0);
    // The old machine's snapshot of the same revision is still its own: it was not overwritten under the same id.
    const versions = (await store.readStream(snapshotStreamOf('counter-w'))).map((e) => (e.data as { machine: string }).machine);
    expect(new Set(versions).size).toBe(2);
  });

  it('applies the upcaster to an event stored at an older schema version', async () => {
    await appendRaw('counter-old', [{ type: 'counter.incremented', data: { amount: 4 }, schemaVersion: 1 }]);
    const rt = await started();
    expect((await rt.get('counter', 'old'))?.context.count).toBe(4);
    expect((await rt.send('counter', 'old', inc(1))).context.count).toBe(5);
  });

  it('reports a stored event that fails its schema as corrupt, with its stream and revision', async () => {
    await appendRaw('counter-bad', [
      { type: 'counter.incremented', data: { by: 1 } },
      { type: 'counter.incremented', data: { by: 'lots' } },
    ]);
    const rt = await started();
    const err = await rt.get('counter', 'bad').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CorruptEvent);
    expect((err as CorruptEvent).detail).toEqual({ stream: 'counter-bad', revision: '1' });
    await expect(rt.send('counter', 'bad', inc(1))).rejects.toBeInstanceOf(CorruptEvent);
  });
});

describe('ActorRuntime: effects under way', () => {
  it('says an actor has an effect running until it ends (maintenance does not re-drive it meanwhile)', async () => {
    const rt = await started();
    let finish!: () => void;
    const gate = new Promise<void>((r) => (finish = r));
    rt.register({ ...counterActor, type: 'slow', effects: { announce: () => gate } });
    await rt.send('slow', 's1', inc(9));
    expect(rt.effectRunning('slow', 's1')).toBe(false);
    await rt.send('slow', 's1', inc(2)); // crosses ten: `announce` runs, and waits
    expect(rt.effectRunning('slow', 's1')).toBe(true);
    expect(rt.effectRunning('slow', 'other')).toBe(false);
    finish();
    await rt.whenIdle();
    expect(rt.effectRunning('slow', 's1')).toBe(false);
  });
});

describe('ActorRuntime: effects that throw', () => {
  it('logs the failure and sends nothing for it', async () => {
    const logged: { obj: object; msg?: string }[] = [];
    const log = (obj: object, msg?: string) => void logged.push({ obj, msg });
    const rt = await started({ logger: { debug: log, info: log, warn: log, error: log } });
    rt.register({
      ...counterActor,
      type: 'fragile',
      effects: {
        announce: () => {
          throw new Error('provider exploded');
        },
      },
    });
    await rt.send('fragile', 'f1', inc(10));
    await rt.whenIdle();
    expect((await store.readStream('fragile-f1')).map((e) => e.type)).toEqual(['counter.incremented']);
    expect(rt.stats.effectsFailed).toBe(1);
    expect(logged.map((l) => l.msg)).toContain('effect threw; nothing is sent for it');
  });
});

describe('ActorRuntime: recovery', () => {
  it('sends runtime.recovered to every unfinished actor and its inspection effects run', async () => {
    const before = await started({ snapshotEvery: 3 });
    for (let i = 0; i < 5; i++) await before.send('counter', 'open-1', inc(1));
    await before.send('counter', 'open-2', inc(2));
    await before.send('counter', 'shut', inc(2));
    await before.send('counter', 'shut', { type: 'counter.closed' });
    await before.whenIdle();

    const services: CounterServices = { inspected: [] };
    const after = await started({ services, snapshotEvery: 3 });
    const report = await after.recover();
    await after.whenIdle();
    expect(report).toMatchObject({ actors: 2, recovered: 2, failed: 0 });
    expect(services.inspected.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
      { id: 'open-1', count: 5 },
      { id: 'open-2', count: 2 },
    ]);
    const [last] = await store.readStream('counter-open-1', { direction: 'backwards', maxCount: 1 });
    expect(last.type).toBe('runtime.recovered');
    expect(last.data).toMatchObject({ runtimeId: 'rt-a', epoch: 2 });
    expect((await after.get('counter', 'open-1'))?.context).toMatchObject({ count: 5, recoveries: 1 });
  });

  it('reports an actor with a corrupt event as failed and still reconciles the others', async () => {
    const before = await started();
    await before.send('counter', 'fine', inc(1));
    await appendRaw('counter-broken', [{ type: 'counter.incremented', data: { by: 'many' } }]);
    const services: CounterServices = { inspected: [] };
    const logged: string[] = [];
    const log = (_: object, msg?: string) => void logged.push(msg ?? '');
    const after = await started({ services, logger: { debug: log, info: log, warn: log, error: log } });
    expect(await after.recover()).toMatchObject({ actors: 2, recovered: 1, failed: 1 });
    await after.whenIdle();
    expect(services.inspected).toEqual([{ id: 'fine', count: 1 }]);
    expect(logged).toContain('actor cannot be rehydrated; it is not reconciled');
  });
});
