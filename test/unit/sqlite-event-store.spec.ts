/**
 * The SQLite event store: the shared conformance suite on a temporary file, plus what only SQLite has — group commit
 * and corrupt rows written behind the store's back.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import type { EventData } from '../../src/store/event-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { eventStoreConformance } from '../store/conformance.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-sqlite-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const event = (type: string): EventData => ({ id: randomUUID(), type, data: { at: type } });

eventStoreConformance('sqlite', async () => SqliteEventStore.open(join(dir, 'conformance.sqlite3')));

describe('sqlite event store: group commit', () => {
  let store: SqliteEventStore;
  beforeEach(() => {
    store = SqliteEventStore.open(join(dir, `group-${randomUUID()}.sqlite3`));
  });
  afterEach(() => store.close());

  it('should report -1 as the head of an empty store', async () => {
    expect(await store.headPosition()).toBe(-1n);
    expect(await store.readAll()).toEqual([]);
  });

  it('should commit 200 concurrent appends in a handful of transactions', async () => {
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) => store.append(`g-${i}`, [event('t.a')], { expectedRevision: 'no_stream' })),
    );
    expect(new Set(results.map((r) => r.position)).size).toBe(200);
    expect(store.stats.appends).toBe(200);
    expect(store.stats.commits).toBeLessThanOrEqual(2);
    expect(await store.headPosition()).toBe(200n);
  });

  it('should fail only the appends of a batch that conflict, rolling back their partial writes', async () => {
    const kept = event('t.kept');
    await store.append('p-1', [kept], { expectedRevision: 'no_stream' });
    const commitsBefore = store.stats.commits;
    const fresh = event('t.fresh');
    const [ok1, stale, partial, ok2] = await Promise.allSettled([
      store.append('p-2', [event('t.a')], { expectedRevision: 'no_stream' }),
      store.append('p-1', [event('t.b')], { expectedRevision: 'no_stream' }),
      // The second id is already in p-1: the first event is inserted, then the savepoint must undo it.
      store.append('p-1', [fresh, kept], { expectedRevision: 'any' }),
      store.append('p-1', [event('t.c')], { expectedRevision: 0n }),
    ]);
    expect(store.stats.commits).toBe(commitsBefore + 1);
    expect(ok1.status).toBe('fulfilled');
    expect(ok2).toMatchObject({ status: 'fulfilled', value: { nextRevision: 1n } });
    expect(stale).toMatchObject({ status: 'rejected', reason: { code: 'wrong_expected_version', actual: 0n } });
    expect(partial).toMatchObject({ status: 'rejected', reason: { code: 'wrong_expected_version' } });
    const p1 = await store.readStream('p-1');
    expect(p1.map((e) => e.type)).toEqual(['t.kept', 't.c']);
  });

  it('should see appends of the same batch in order, so a later append may build on an earlier one', async () => {
    const [first, second] = await Promise.all([
      store.append('o-1', [event('t.a')], { expectedRevision: 'no_stream' }),
      store.append('o-1', [event('t.b')], { expectedRevision: 0n }),
    ]);
    expect(first.nextRevision).toBe(0n);
    expect(second.nextRevision).toBe(1n);
    expect(store.stats.commits).toBe(1);
  });

  it('should make acknowledged appends durable across a reopen, including those pending at close', async () => {
    const file = join(dir, `durable-${randomUUID()}.sqlite3`);
    const a = SqliteEventStore.open(file);
    await a.append('d-1', [event('t.a')], { expectedRevision: 'no_stream' });
    const pending = a.append('d-1', [event('t.b')], { expectedRevision: 0n });
    await a.close();
    expect((await pending).nextRevision).toBe(1n);
    const b = SqliteEventStore.open(file);
    try {
      expect((await b.readStream('d-1')).map((e) => e.type)).toEqual(['t.a', 't.b']);
      await expect(a.append('d-1', [event('t.c')], { expectedRevision: 'any' })).rejects.toMatchObject({ code: 'unavailable' });
    } finally {
      await b.close();
    }
  });

  it('should wake a live subscription with events appended through another connection to the same file', async () => {
    const file = join(dir, `shared-${randomUUID()}.sqlite3`);
    const reader = SqliteEventStore.open(file, { pollIntervalMs: 20 });
    const writer = SqliteEventStore.open(file);
    try {
      const sub = reader.subscribeToAll();
      const it = sub[Symbol.asyncIterator]();
      const next = it.next();
      await new Promise((resolve) => setTimeout(resolve, 50));
      const e = event('t.remote');
      await writer.append('r-1', [e], { expectedRevision: 'no_stream' });
      expect((await next).value).toMatchObject({ id: e.id, position: 1n });
      await sub.close();
    } finally {
      await Promise.all([reader.close(), writer.close()]);
    }
  }, 10_000);

  it("should answer a stream's revision now, moved by its own writes, another connection's and a compaction, not by reads", async () => {
    const file = join(dir, `revision-${randomUUID()}.sqlite3`);
    const mine = SqliteEventStore.open(file);
    const other = SqliteEventStore.open(file);
    try {
      expect(mine.revisionNow('m-1')).toBe(-1n);
      await mine.append('m-1', [event('t.first')], { expectedRevision: 'no_stream' });
      await mine.readStream('m-1');
      await mine.readAll();
      await mine.streamRevision('m-2');
      expect(mine.revisionNow('m-1')).toBe(0n);
      await mine.append('m-1', [event('t.mine')], { expectedRevision: 0n });
      expect(mine.revisionNow('m-1')).toBe(1n);
      await other.append('m-2', [event('t.other')], { expectedRevision: 'no_stream' });
      expect([mine.revisionNow('m-1'), mine.revisionNow('m-2')]).toEqual([1n, 0n]);
      await other.compactStream('m-1', event('t.summary'), { expectedRevision: 1n, dropStreams: ['m-2'] });
      expect([mine.revisionNow('m-1'), mine.revisionNow('m-2')]).toEqual([2n, -1n]);
    } finally {
      await Promise.all([mine.close(), other.close()]);
    }
  });
});

describe('sqlite event store: corrupt rows', () => {
  let file: string;
  let store: SqliteEventStore;
  beforeEach(async () => {
    file = join(dir, `corrupt-${randomUUID()}.sqlite3`);
    store = SqliteEventStore.open(file);
    await store.append('c-1', [event('t.a'), event('t.b'), event('t.c')], { expectedRevision: 'no_stream' });
    const raw = new Database(file);
    raw.prepare("UPDATE events SET data = '{not json' WHERE stream = 'c-1' AND revision = 1").run();
    raw.close();
  });
  afterEach(() => store.close());

  const isCorruptAt = (e: unknown) => isBerthError(e, 'corrupt_event') && e.detail.stream === 'c-1' && e.detail.revision === '1';

  it('should report the corrupt event with its stream and revision from readStream and readAll', async () => {
    expect(isCorruptAt(await store.readStream('c-1').catch((e: unknown) => e))).toBe(true);
    expect(isCorruptAt(await store.readAll().catch((e: unknown) => e))).toBe(true);
    expect(await store.readStream('c-1', { maxCount: 1 })).toHaveLength(1);
  });

  it('should stop a subscription at the corrupt event every time instead of skipping it', async () => {
    const it = store.subscribeToAll()[Symbol.asyncIterator]();
    expect((await it.next()).value).toMatchObject({ stream: 'c-1', revision: 0n });
    expect(isCorruptAt(await it.next().catch((e: unknown) => e))).toBe(true);
    expect(isCorruptAt(await it.next().catch((e: unknown) => e))).toBe(true);
  });

  it('should report metadata that is not an object', async () => {
    const raw = new Database(file);
    raw.prepare("UPDATE events SET data = '{}', metadata = '[1]' WHERE stream = 'c-1' AND revision = 1").run();
    raw.close();
    expect(isCorruptAt(await store.readStream('c-1').catch((e: unknown) => e))).toBe(true);
  });
});

describe('openStore', () => {
  it('should open the sqlite store as events.sqlite3 under the data directory, creating it', async () => {
    const dataDir = join(dir, `data-${randomUUID()}`, 'nested');
    const store = await openStore('sqlite', dataDir);
    try {
      expect(store.kind).toBe('sqlite');
      await store.append('os-1', [event('t.a')], { expectedRevision: 'no_stream' });
      expect(existsSync(join(dataDir, 'events.sqlite3'))).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('should refuse an unknown store spec', async () => {
    await expect(openStore('postgres://x', dir)).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it('should refuse an event that is not JSON-serialisable without failing others', async () => {
    const store = await openStore('sqlite', join(dir, `data-${randomUUID()}`));
    try {
      const [bad, good] = await Promise.allSettled([
        store.append('j-1', [{ id: randomUUID(), type: 't.a', data: { n: 1n } }], { expectedRevision: 'any' }),
        store.append('j-2', [event('t.b')], { expectedRevision: 'any' }),
      ]);
      expect(bad).toMatchObject({ status: 'rejected', reason: { code: 'invalid_request' } });
      expect(good.status).toBe('fulfilled');
    } finally {
      await store.close();
    }
  });
});

describe('sqlite event store: a long catch-up lets the event loop turn', () => {
  const EVENTS = 20 * 256;
  let store: SqliteEventStore;
  beforeAll(async () => {
    store = SqliteEventStore.open(join(dir, `turns-${randomUUID()}.sqlite3`));
    for (let i = 0; i < 20; i++) await Promise.all(Array.from({ length: 256 }, (_, j) => store.append(`p-${i}-${j}`, [event('t.p')], { expectedRevision: 'no_stream' })));
  });
  afterAll(() => store.close());

  it('turns while a consumer takes every event at once', async () => {
    const sub = store.subscribeToAll();
    let taken = 0;
    let takenAtFirstTurn: number | undefined;
    setImmediate(() => (takenAtFirstTurn = taken));
    for await (const _ of sub) if (++taken === EVENTS) break;
    await sub.close();
    // Before, the whole catch-up was one chain of promise callbacks: the first turn came after the last event.
    expect(takenAtFirstTurn).toBeGreaterThan(0);
    expect(takenAtFirstTurn).toBeLessThan(EVENTS);
  });

  it('turns while its filter passes every event over', async () => {
    let looked = 0;
    const sub = store.subscribeToAll({ filter: { skip: () => (looked++, true) } });
    const waiting = sub[Symbol.asyncIterator]().next();
    // Scheduled before the subscription's first read: it runs at the first turn the scan lets happen.
    await new Promise(setImmediate);
    expect(looked).toBeGreaterThan(0);
    expect(looked).toBeLessThan(EVENTS);
    await sub.close();
    expect((await waiting).done).toBe(true);
  });
});
