/**
 * Projection rebuild speed: a catalog-like projection (one row per stream: event count, last type, last data)
 * rebuilt from zero by the projection engine into its SQLite table, against a raw full scan of the same events table
 * that parses each row, applies the same fold by hand and upserts the row into a raw SQLite table in one transaction
 * (the least a read model kept on disk must do per event). Two figures: `rebuild()` on a running engine (readAll pages), and a
 * fresh engine catching up from zero through its subscription (what a start without a checkpoint does).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { defineProjection, table, type Tables } from '../src/projections/projection.ts';
import { ProjectionEngine } from '../src/projections/projection-engine.ts';
import { SqliteReadModelStore } from '../src/projections/sqlite-read-model-store.ts';
import type { RecordedEvent } from '../src/store/event-store.ts';
import { SqliteEventStore } from '../src/store/sqlite-event-store.ts';
import { median } from './figure.ts';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 100_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const STREAMS = 1000;
const TARGET = 0.5;

interface Row {
  events: number;
  lastType: string;
  last: unknown;
}

/** The fold, over anything that gets and puts rows by stream. */
const fold = (rows: { get(k: string): Row | undefined; put(k: string, r: Row): void }, e: Pick<RecordedEvent, 'stream' | 'type' | 'data'>) => {
  const row = rows.get(e.stream);
  if (row) {
    row.events++;
    row.lastType = e.type;
    row.last = e.data;
    rows.put(e.stream, row);
  } else rows.put(e.stream, { events: 1, lastType: e.type, last: e.data });
};

const catalog = defineProjection({
  name: 'bench-catalog',
  version: 1,
  filter: { streamPrefixes: ['thing-'] },
  tables: { things: table<Row>() },
  reduce: (t: Tables<{ things: Row }>, e) => fold(t.things, e),
  queries: { count: (t) => t.things.count() },
});

async function populate(store: SqliteEventStore): Promise<void> {
  const perAppend = 10;
  const appends: Promise<unknown>[] = [];
  for (let i = 0; i < EVENTS / perAppend; i++) {
    const events = Array.from({ length: perAppend }, (_, j) => ({
      id: randomUUID(),
      type: j === 0 ? 'thing.created' : 'thing.changed',
      data: { n: i * perAppend + j, name: `thing ${i % STREAMS}`, note: 'x'.repeat(40) },
      metadata: { runtimeId: 'rt_bench', epoch: 1, correlationId: randomUUID() },
    }));
    appends.push(store.append(`thing-${i % STREAMS}`, events, { expectedRevision: 'any' }));
    if (appends.length >= 200) await Promise.all(appends.splice(0));
  }
  await Promise.all(appends);
}

/** Events/s of reading every row (in pages by position, the fastest way through better-sqlite3), parsing it and
 * folding it with the same reducer. */
function rawScan(file: string, round: number): number {
  const db = new Database(file, { readonly: true });
  db.defaultSafeIntegers(true);
  const out = new Database(join(dir, `raw-${round}.sqlite3`));
  out.pragma('journal_mode = WAL');
  out.pragma('synchronous = NORMAL');
  out.exec('CREATE TABLE things (key TEXT PRIMARY KEY, row TEXT NOT NULL)');
  const upsert = out.prepare('INSERT INTO things (key, row) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET row = excluded.row');
  const stmt = db.prepare<[bigint], { position: bigint; stream: string; type: string; data: string; metadata: string }>(
    'SELECT position, stream, revision, id, type, data, metadata, created_at FROM events WHERE position > ? ORDER BY position LIMIT 1000',
  );
  const t0 = performance.now();
  const state = new Map<string, Row>();
  const rows = { get: (k: string) => state.get(k), put: (k: string, r: Row) => (state.set(k, r), upsert.run(k, JSON.stringify(r))) };
  let n = 0;
  out.exec('BEGIN');
  for (let after = 0n, page = stmt.all(after); page.length > 0; after = page[page.length - 1].position, page = stmt.all(after)) {
    for (const row of page) {
      JSON.parse(row.metadata);
      if (row.stream.startsWith('thing-')) fold(rows, { stream: row.stream, type: row.type, data: JSON.parse(row.data) });
      n++;
    }
  }
  out.exec('COMMIT');
  const rate = n / ((performance.now() - t0) / 1000);
  db.close();
  out.close();
  if (state.size !== STREAMS) throw new Error(`raw scan saw ${state.size} streams`);
  return rate;
}

async function engineRebuild(store: SqliteEventStore, dir: string, round: number): Promise<{ rebuild: number; catchUp: number }> {
  const models = SqliteReadModelStore.open(join(dir, `projections-${round}.sqlite3`));
  const engine = new ProjectionEngine({ store, models, checkpointIntervalMs: 3_600_000, checkpointEvery: Number.MAX_SAFE_INTEGER });
  const model = engine.register(catalog);
  let t0 = performance.now();
  await engine.start();
  await engine.catchUp();
  const catchUp = EVENTS / ((performance.now() - t0) / 1000);
  t0 = performance.now();
  await engine.rebuild(catalog.name);
  const rebuild = EVENTS / ((performance.now() - t0) / 1000);
  if (model.query.count() !== STREAMS) throw new Error(`projection saw ${model.query.count()} streams`);
  await engine.stop();
  models.close();
  return { rebuild, catchUp };
}

function line(bench: string, value: number, baseline: number) {
  const round = (x: number) => Math.round(x * 100) / 100;
  const ratio = value / baseline;
  return JSON.stringify({ bench, value: round(value), unit: 'events/s', baseline: round(baseline), ratio: round(ratio), target: `>= ${TARGET}`, met: ratio >= TARGET });
}

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-projection-'));
try {
  const file = join(dir, 'events.sqlite3');
  const store = SqliteEventStore.open(file);
  await populate(store);
  const raw: number[] = [];
  const rebuild: number[] = [];
  const catchUp: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    raw.push(rawScan(file, round));
    const r = await engineRebuild(store, dir, round);
    rebuild.push(r.rebuild);
    catchUp.push(r.catchUp);
  }
  await store.close();
  process.stderr.write(
    `${EVENTS} events: raw scan ${median(raw).toFixed(0)}/s, rebuild ${median(rebuild).toFixed(0)}/s, ` +
      `catch-up from zero ${median(catchUp).toFixed(0)}/s\n`,
  );
  console.log(line('projection-rebuild', median(rebuild), median(raw)));
  console.log(line('projection-catch-up-from-zero', median(catchUp), median(raw)));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
