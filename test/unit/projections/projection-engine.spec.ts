import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { CheckpointStore } from '../../../src/projections/checkpoint-store.ts';
import { ProjectionEngine } from '../../../src/projections/projection-engine.ts';
import { defineProjection } from '../../../src/projections/projection.ts';
import type { RecordedEvent } from '../../../src/store/event-store.ts';

/** Counts `counter-*` events per stream and remembers every position it applied, to catch double application. */
const counterProjection = (calls: { n: number } = { n: 0 }, version = 1) =>
  defineProjection({
    name: 'counters',
    version,
    filter: { streamPrefixes: ['counter-'] },
    init: () => ({ perStream: new Map<string, number>(), applied: [] as bigint[] }),
    reduce(state, event: RecordedEvent) {
      calls.n++;
      state.perStream.set(event.stream, (state.perStream.get(event.stream) ?? 0) + 1);
      state.applied.push(event.position);
      return state;
    },
    queries: {
      count: (state, stream: string) => state.perStream.get(stream) ?? 0,
      total: (state) => state.applied.length,
    },
  });

let dir: string;
let store: SqliteEventStore;
const open: { close(): unknown }[] = [];

const append = async (stream: string, n: number) => {
  let position = -1n;
  for (let i = 0; i < n; i++) {
    ({ position } = await store.append(stream, [{ id: randomUUID(), type: 'counted', data: { i } }], {
      expectedRevision: 'any',
    }));
  }
  return position;
};

function engine(opts: { calls?: { n: number }; version?: number; interval?: number } = {}) {
  const checkpoints = CheckpointStore.open(join(dir, 'projections.sqlite3'));
  const e = new ProjectionEngine({ store, checkpoints, checkpointIntervalMs: opts.interval ?? 60_000 });
  const model = e.register(counterProjection(opts.calls, opts.version));
  open.push({ close: async () => (await e.stop(), checkpoints.close()) });
  return { engine: e, model, checkpoints };
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-projections-'));
  store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
});

afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('projection engine', () => {
  it('should reflect every event up to the head after catchUp, with queries bound to the state', async () => {
    await append('counter-a', 3);
    await append('other-x', 2);
    const head = await append('counter-b', 1);
    const { engine: e, model } = engine();
    await e.start();
    await e.catchUp();
    expect(model.position).toBe(head);
    expect(model.query.count('counter-a')).toBe(3);
    expect(model.query.count('counter-b')).toBe(1);
    expect(model.query.total()).toBe(4);
    expect(await e.lag()).toEqual({ counters: 0n });
  });

  it('should resume from its checkpoint after a restart without applying any event twice', async () => {
    await append('counter-a', 10);
    const first = engine();
    await first.engine.start();
    await first.engine.catchUp();
    await first.engine.stop();
    first.checkpoints.close();
    open.length = 0;

    await append('counter-a', 5);
    await append('other-x', 3);
    const calls = { n: 0 };
    const second = engine({ calls });
    await second.engine.start();
    await second.engine.catchUp();
    expect(calls.n).toBe(5);
    expect(second.model.query.count('counter-a')).toBe(15);
    const applied = second.model.state.applied;
    expect(new Set(applied).size).toBe(applied.length);
    expect(second.model.position).toBe(await store.headPosition());
  });

  it('should resume from an older checkpoint after a crash and still apply each event once', async () => {
    await append('counter-a', 10);
    const crashed = engine();
    await crashed.engine.start();
    await crashed.engine.catchUp();
    crashed.engine.checkpoint();
    const tail = await append('counter-a', 5);
    expect(await crashed.model.waitFor(tail, 5000)).toBe(true);
    // The crashed runtime never saved past 10 events; a new one starts from that snapshot.
    const calls = { n: 0 };
    const next = engine({ calls });
    await next.engine.start();
    await next.engine.catchUp();
    expect(calls.n).toBe(5);
    expect(next.model.state.applied).toEqual(crashed.model.state.applied);
  });

  it('should rebuild from zero to the same state as incremental application, while appends go on', async () => {
    const { engine: e, model } = engine();
    await e.start();
    await append('counter-a', 20);
    await append('other-x', 5);
    await append('counter-b', 20);
    await e.catchUp();
    const incremental = structuredClone(model.state);
    const during = append('counter-c', 30);
    await e.rebuild('counters');
    const head = await during;
    expect(await model.waitFor(head, 5000)).toBe(true);
    expect(model.state.applied.slice(0, incremental.applied.length)).toEqual(incremental.applied);
    expect(model.query.count('counter-b')).toBe(20);
    expect(model.query.count('counter-c')).toBe(30);
    expect(new Set(model.state.applied).size).toBe(model.state.applied.length);

    const fresh = engine();
    fresh.checkpoints.remove('counters');
    await fresh.engine.start();
    await fresh.engine.catchUp();
    expect(fresh.model.state).toEqual(model.state);
  });

  it('should resolve waitFor at the position of a later write, and false after the timeout', async () => {
    const { engine: e, model } = engine();
    await e.start();
    const before = await append('other-x', 1);
    // SQLite positions are consecutive, so the next append lands at before + 1.
    const waiting = model.waitFor(before + 1n, 5000);
    expect(await append('counter-a', 1)).toBe(before + 1n);
    expect(await waiting).toBe(true);
    expect(model.query.count('counter-a')).toBe(1);
    // Positions of events outside the filter count too.
    const other = await append('other-y', 1);
    expect(await model.waitFor(other, 5000)).toBe(true);
    expect(await model.waitFor(other + 1000n, 50)).toBe(false);
  });

  it('should discard a snapshot taken by another projection version and rebuild from zero', async () => {
    await append('counter-a', 4);
    const v1 = engine();
    await v1.engine.start();
    await v1.engine.catchUp();
    await v1.engine.stop();
    const calls = { n: 0 };
    const v2 = engine({ calls, version: 2 });
    await v2.engine.start();
    await v2.engine.catchUp();
    expect(calls.n).toBe(4);
    expect(v2.model.query.total()).toBe(4);
  });

  it('should fail only the model whose reducer throws, and recover it by rebuild', async () => {
    let broken = true;
    const checkpoints = CheckpointStore.open(join(dir, 'projections.sqlite3'));
    const e = new ProjectionEngine({ store, checkpoints });
    open.push({ close: async () => (await e.stop(), checkpoints.close()) });
    const fragile = e.register(
      defineProjection({
        name: 'fragile',
        version: 1,
        init: () => 0,
        reduce: (n: number, event) => {
          if (broken && event.stream === 'poison-1') throw new Error('boom');
          return n + 1;
        },
      }),
    );
    const counters = e.register(counterProjection());
    await append('counter-a', 2);
    const poison = await append('poison-1', 1);
    await e.start();
    await expect(fragile.waitFor(poison, 5000)).rejects.toMatchObject({ code: 'internal' });
    expect(await counters.waitFor(poison, 5000)).toBe(true);
    expect(fragile.state).toBe(2);
    broken = false;
    await e.rebuild('fragile');
    const head = await append('counter-a', 1);
    expect(await fragile.waitFor(head, 5000)).toBe(true);
    expect(fragile.state).toBe(4);
  });
});
