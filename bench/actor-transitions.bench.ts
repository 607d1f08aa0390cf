/**
 * Actor transitions committed per second (validate, decide, append with metadata, cache) for one actor driven
 * sequentially and for 100 actors driven concurrently (the store's group commit), against raw better-sqlite3
 * committing one row per transaction (WAL, synchronous=FULL). Baseline and runtime alternate over several rounds on
 * files in a temporary directory and each keeps its median, as disk flush times drift.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ActorRuntime } from '../src/actors/actor-runtime.ts';
import { SqliteEventStore } from '../src/store/sqlite-event-store.ts';
import { tallyActor } from '../test/fixtures/actors/tally.actor.ts';
import { median } from './figure.ts';

const SEQUENTIAL = Number(process.env.BENCH_TRANSITIONS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const ACTORS = 100;
const PER_ACTOR = Number(process.env.BENCH_PER_ACTOR ?? 20);

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-actors-'));
const perSecond = (count: number, startNs: bigint) => count / (Number(process.hrtime.bigint() - startNs) / 1e9);

function openRaw(): Database.Database {
  const db = new Database(join(dir, 'raw.sqlite3'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE events (position INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL,
    revision INTEGER NOT NULL, id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL,
    created_at TEXT NOT NULL, UNIQUE (stream, revision))`);
  return db;
}

/** The baseline: one FULL-synchronous commit of one event row, with nothing around it. */
function rawSingleRowCommits(db: Database.Database, round: number): number {
  const insert = db.prepare(
    'INSERT INTO events (stream, revision, id, type, data, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
  );
  const metadata = JSON.stringify({ runtimeId: 'bench', epoch: 1, actorType: 'tally', from: 'open', to: 'open' });
  const start = process.hrtime.bigint();
  for (let i = 0; i < SEQUENTIAL; i++) {
    insert.run(`tally-raw${round}`, i, randomUUID(), 'tally.added', '{"n":1}', metadata, new Date().toISOString());
  }
  return perSecond(SEQUENTIAL, start);
}

async function oneActorSequential(rt: ActorRuntime, round: number): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < SEQUENTIAL; i++) await rt.send('tally', `seq${round}`, { type: 'tally.added', n: 1 });
  return perSecond(SEQUENTIAL, start);
}

async function manyActorsConcurrent(rt: ActorRuntime, round: number): Promise<number> {
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: ACTORS }, async (_, a) => {
      for (let i = 0; i < PER_ACTOR; i++) await rt.send('tally', `conc${round}-${a}`, { type: 'tally.added', n: 1 });
    }),
  );
  return perSecond(ACTORS * PER_ACTOR, start);
}

function line(bench: string, value: number, unit: string, baseline: number, target: number) {
  const ratio = value / baseline;
  const r = (x: number) => Math.round(x * 100) / 100;
  return JSON.stringify({ bench, value: r(value), unit, baseline: r(baseline), ratio: r(ratio), target: `>= ${target}`, met: ratio >= target });
}

try {
  const store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
  const rt = new ActorRuntime({ store, runtimeId: 'bench' }).register(tallyActor);
  await rt.start();
  const raw = openRaw();
  const rates = { baseline: [] as number[], sequential: [] as number[], concurrent: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    rates.baseline.push(rawSingleRowCommits(raw, round));
    rates.sequential.push(await oneActorSequential(rt, round));
    rates.concurrent.push(await manyActorsConcurrent(rt, round));
  }
  await rt.whenIdle();
  raw.close();
  await store.close();
  const [baseline, sequential, concurrent] = [median(rates.baseline), median(rates.sequential), median(rates.concurrent)];
  process.stderr.write(
    `raw ${baseline.toFixed(0)} commits/s, 1 actor ${sequential.toFixed(0)} transitions/s, ` +
      `${ACTORS} actors ${concurrent.toFixed(0)} transitions/s\n`,
  );
  console.log(line('actor-transitions-sequential', sequential, 'transitions/s', baseline, 0.5));
  console.log(line('actor-transitions-100-concurrent', concurrent, 'transitions/s', baseline, 3));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
