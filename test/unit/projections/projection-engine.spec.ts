import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { ProjectionEngine } from '../../../src/projections/projection-engine.ts';
import { defineProjection, table } from '../../../src/projections/projection.ts';
import { SqliteReadModelStore } from '../../../src/projections/sqlite-read-model-store.ts';
import type { RecordedEvent } from '../../../src/store/event-store.ts';

/** Counts `counter-*` events per stream and records every position it applied; applying one twice fails the model. */
const counterProjection = (calls: { n: number } = { n: 0 }, version = 1) =>
  defineProjection({
    name: 'counters',
    version,
    filter: { streamPrefixes: ['counter-'] },
    tables: { streams: table<{ n: number }>(), applied: table<{ position: string }>() },
    reduce(t, event: RecordedEvent) {
      calls.n++;
      const key = event.position.toString().padStart(12, '0');
      if (t.applied.get(key)) throw new Error(`position ${event.position} applied twice`);
      t.applied.put(key, { position: event.position.toString() });
      t.streams.put(event.stream, { n: (t.streams.get(event.stream)?.n ?? 0) + 1 });
    },
    queries: {
      count: (t, stream: string) => t.streams.get(stream)?.n ?? 0,
      total: (t) => t.applied.count(),
      applied: (t) => t.applied.all().map((a) => a.position),
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

function engine(opts: { calls?: { n: number }; version?: number; interval?: number; dropFirst?: boolean } = {}) {
  const models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
  if (opts.dropFirst) models.drop('counters');
  const e = new ProjectionEngine({ store, models, checkpointIntervalMs: opts.interval ?? 60_000 });
  const model = e.register(counterProjection(opts.calls, opts.version));
  open.push({ close: async () => (await e.stop(), models.close()) });
  return { engine: e, model, models };
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

/** A model that counts every event it sees, writing before it may throw on the poison stream. */
function fragileEngine(broken: () => boolean, pageSize?: number) {
  const models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
  const e = new ProjectionEngine({ store, models, pageSize });
  open.push({ close: async () => (await e.stop(), models.close()) });
  const fragile = e.register(
    defineProjection({
      name: 'fragile',
      version: 1,
      tables: { seen: table<{ stream: string }>() },
      reduce: (t, event) => {
        t.seen.put(event.position.toString(), { stream: event.stream });
        if (broken() && event.stream === 'poison-1') throw new Error('boom');
      },
      queries: { n: (t) => t.seen.count() },
    }),
  );
  return { e, fragile, counters: e.register(counterProjection()) };
}

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
    first.models.close();
    open.length = 0;

    await append('counter-a', 5);
    await append('other-x', 3);
    const calls = { n: 0 };
    const second = engine({ calls });
    await second.engine.start();
    await second.engine.catchUp();
    expect(calls.n).toBe(5);
    expect(second.model.query.count('counter-a')).toBe(15);
    expect(second.model.error).toBeUndefined();
    expect(second.model.query.total()).toBe(15);
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
    const before = crashed.model.query.applied();
    // The crash: its connection goes without a commit, so the rows of the last 5 events go with their position.
    crashed.models.close();
    await crashed.engine.stop();
    open.length = 0;
    const calls = { n: 0 };
    const next = engine({ calls });
    await next.engine.start();
    await next.engine.catchUp();
    expect(calls.n).toBe(5);
    expect(next.model.error).toBeUndefined();
    expect(next.model.query.applied()).toEqual(before);
  });

  it('should rebuild from zero to the same state as incremental application, while appends go on', async () => {
    const { engine: e, model } = engine();
    await e.start();
    await append('counter-a', 20);
    await append('other-x', 5);
    await append('counter-b', 20);
    await e.catchUp();
    const incremental = model.query.applied();
    const during = append('counter-c', 30);
    await e.rebuild('counters');
    const head = await during;
    expect(await model.waitFor(head, 5000)).toBe(true);
    expect(model.error).toBeUndefined();
    expect(model.query.applied().slice(0, incremental.length)).toEqual(incremental);
    expect(model.query.count('counter-b')).toBe(20);
    expect(model.query.count('counter-c')).toBe(30);
    const rebuilt = model.query.applied();
    await e.stop();

    const fresh = engine({ dropFirst: true });
    await fresh.engine.start();
    await fresh.engine.catchUp();
    expect(fresh.model.query.applied()).toEqual(rebuilt);
    expect(fresh.model.query.count('counter-c')).toBe(30);
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
    const { e, fragile, counters } = fragileEngine(() => broken);
    await append('counter-a', 2);
    const poison = await append('poison-1', 1);
    await e.start();
    await expect(fragile.waitFor(poison, 5000)).rejects.toMatchObject({ code: 'projection_failed' });
    expect(await counters.waitFor(poison, 5000)).toBe(true);
    expect(fragile.error).toBeDefined();
    // Its queries answer the typed failure instead of rows that stop at an event the others have passed.
    expect(() => fragile.query.n()).toThrow(expect.objectContaining({ code: 'projection_failed' }));
    expect(e.failed.map((f) => f.name)).toEqual(['fragile']);
    broken = false;
    await e.rebuild('fragile');
    const head = await append('counter-a', 1);
    expect(await fragile.waitFor(head, 5000)).toBe(true);
    expect(fragile.query.n()).toBe(4);
  });

  it('should rebuild a failed model from the start after a restart, without the writes of the event it failed on', async () => {
    let broken = true;
    const first = fragileEngine(() => broken);
    await append('counter-a', 2);
    const poison = await append('poison-1', 1);
    await first.e.start();
    await expect(first.fragile.waitFor(poison, 5000)).rejects.toMatchObject({ code: 'projection_failed' });
    await append('counter-a', 3);
    await first.e.stop();
    open.length = 0;
    broken = false;
    const second = fragileEngine(() => broken);
    await second.e.start();
    await second.e.catchUp();
    expect(second.fragile.error).toBeUndefined();
    // Every event once: the poison's write before it threw was not kept (that would count 7).
    expect(second.fragile.query.n()).toBe(6);
    expect(second.counters.query.total()).toBe(5);
  });

  it('should catch up at start with a model that fails on the way: the others serve, the failed one says so', async () => {
    const { e, fragile, counters } = fragileEngine(() => true);
    await append('counter-a', 2);
    await append('poison-1', 1);
    const head = await append('counter-b', 2);
    await e.start();
    await e.catchUp(5000);
    expect(counters.position).toBe(head);
    expect(counters.query.total()).toBe(4);
    expect(fragile.error).toMatchObject({ code: 'projection_failed' });
    expect(e.failed).toEqual([expect.objectContaining({ name: 'fragile', position: String(head - 2n) })]);
  });

  it('should fail only the models an undecodable event is for, and go on past it for the others', async () => {
    const { e, fragile, counters } = fragileEngine(() => false);
    await append('counter-a', 2);
    const corrupt = await append('counter-z', 1);
    const head = await append('counter-a', 1);
    // Damage the stored event behind the store's back (a bad disk, a bad hand): its data is no longer JSON.
    const raw = new Database(join(dir, 'events.sqlite3'));
    raw.prepare('UPDATE events SET data = ? WHERE position = ?').run('{not json', corrupt);
    raw.close();
    await e.start();
    await e.catchUp(5000);
    // `counters` is for counter-* streams: it stops before the corrupt event and says so; `fragile` (every stream) too.
    expect(counters.error).toMatchObject({ code: 'projection_failed' });
    expect(counters.position).toBe(corrupt - 1n);
    expect(e.failed.map((f) => f.name).sort()).toEqual(['counters', 'fragile']);
    // Repaired, a rebuild brings the model back through the event and on to the head.
    const fixed = new Database(join(dir, 'events.sqlite3'));
    fixed.prepare('UPDATE events SET data = ? WHERE position = ?').run('{"i":0}', corrupt);
    fixed.close();
    await e.rebuild('counters');
    expect(counters.error).toBeUndefined();
    expect(await counters.waitFor(head, 5000)).toBe(true);
    expect(counters.query.count('counter-z')).toBe(1);
  });

  it('should pass an undecodable event that a model does not select', async () => {
    const models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
    const e = new ProjectionEngine({ store, models });
    open.push({ close: async () => (await e.stop(), models.close()) });
    const counters = e.register(counterProjection());
    await append('counter-a', 1);
    const corrupt = await append('other-x', 1);
    const raw = new Database(join(dir, 'events.sqlite3'));
    raw.prepare('UPDATE events SET metadata = ? WHERE position = ?').run('[]', corrupt);
    raw.close();
    const head = await append('counter-a', 2);
    await e.start();
    await e.catchUp(5000);
    expect(counters.error).toBeUndefined();
    expect(counters.position).toBe(head);
    expect(counters.query.count('counter-a')).toBe(3);
  });
  it('should rebuild past an undecodable event a model does not select, and fail a model it is for', async () => {
    // Pages of 4, so the damaged event sits inside a page and past the first one.
    const { e, fragile, counters } = fragileEngine(() => false, 4);
    await append('counter-a', 5);
    const corrupt = await append('other-x', 1);
    await append('counter-a', 3);
    await e.start();
    await e.catchUp(5000);
    expect(e.failed).toEqual([]);
    // Damaged after both models applied it: only a rebuild meets it.
    const raw = new Database(join(dir, 'events.sqlite3'));
    raw.prepare('UPDATE events SET data = ? WHERE position = ?').run('{not json', corrupt);
    raw.close();
    await e.rebuild('counters');
    expect(counters.error).toBeUndefined();
    expect(counters.query.count('counter-a')).toBe(8);
    expect(counters.query.applied()).not.toContain(String(corrupt));
    // `fragile` selects every stream: its rebuild fails at the event, and the model says so instead of serving.
    await expect(e.rebuild('fragile')).rejects.toMatchObject({ code: 'projection_failed' });
    expect(fragile.error).toMatchObject({ code: 'projection_failed', detail: { position: String(corrupt) } });
    expect(() => fragile.query.n()).toThrow(expect.objectContaining({ code: 'projection_failed' }));
    expect(e.failed).toEqual([expect.objectContaining({ name: 'fragile', position: String(corrupt) })]);
    // The other model goes on serving and following the log.
    const head = await append('counter-b', 1);
    expect(await counters.waitFor(head, 5000)).toBe(true);
    expect(counters.query.count('counter-b')).toBe(1);
  });
});
