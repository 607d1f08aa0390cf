/**
 * SQLite event store append throughput: one sequential appender and 100 concurrent appenders (group commit) against
 * raw better-sqlite3 committing one row per transaction (WAL, synchronous=FULL), plus subscription catch-up against a
 * raw SELECT with JSON decoding. All on files in a temporary directory, measured in this run.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { SqliteEventStore } from '../src/store/sqlite-event-store.ts';
import { median } from './figure.ts';

const SEQUENTIAL = Number(process.env.BENCH_APPENDS ?? 200);
/** Disk flush times drift: baseline and store alternate over several rounds and each keeps its median. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONCURRENT = 100;
const PER_APPENDER = Number(process.env.BENCH_PER_APPENDER ?? 20);

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-store-'));
const payload = { command: ['sh', '-c', 'echo hello'], cwd: '/workspace', env: { A: '1' }, digest: 'sha256:' + '0'.repeat(64) };
const metadata = { runtimeId: 'bench', epoch: 1, correlationId: randomUUID(), actorType: 'execution' };
const newEvent = () => ({ id: randomUUID(), type: 'execution.accepted', data: payload, metadata });

const perSecond = (count: number, startNs: bigint) => count / (Number(process.hrtime.bigint() - startNs) / 1e9);

/** The baseline: what a FULL-synchronous commit of one row costs, with no store around it. */
function rawSingleRowCommits(db: Database.Database, round: number): number {
  const insert = db.prepare('INSERT INTO events (stream, revision, id, type, data, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const start = process.hrtime.bigint();
  for (let i = 0; i < SEQUENTIAL; i++) {
    const e = newEvent();
    insert.run(`raw-${round}`, i, e.id, e.type, JSON.stringify(e.data), JSON.stringify(e.metadata), new Date().toISOString());
  }
  return perSecond(SEQUENTIAL, start);
}

function openRaw(): Database.Database {
  const db = new Database(join(dir, 'raw.sqlite3'));
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec(`CREATE TABLE events (position INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, revision INTEGER NOT NULL,
    id TEXT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL, created_at TEXT NOT NULL,
    UNIQUE (stream, revision), UNIQUE (stream, id))`);
  return db;
}

async function sequentialAppends(store: SqliteEventStore, round: number): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < SEQUENTIAL; i++) {
    await store.append(`seq-${round}`, [newEvent()], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
  }
  return perSecond(SEQUENTIAL, start);
}

async function concurrentAppends(store: SqliteEventStore, round: number): Promise<number> {
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONCURRENT }, async (_, a) => {
      for (let i = 0; i < PER_APPENDER; i++) {
        await store.append(`conc${round}-${a}`, [newEvent()], { expectedRevision: i === 0 ? 'no_stream' : BigInt(i - 1) });
      }
    }),
  );
  return perSecond(CONCURRENT * PER_APPENDER, start);
}

/** Reads every event of the file through a subscription (catch-up only) vs a raw SELECT decoding the same JSON. */
async function catchUp(file: string): Promise<{ store: number; raw: number }> {
  const db = new Database(file, { readonly: true });
  let start = process.hrtime.bigint();
  let n = 0;
  for (const row of db.prepare('SELECT * FROM events ORDER BY position').iterate() as Iterable<{ data: string; metadata: string }>) {
    JSON.parse(row.data);
    JSON.parse(row.metadata);
    n++;
  }
  const raw = perSecond(n, start);
  db.close();

  const store = SqliteEventStore.open(file);
  const head = await store.headPosition();
  const sub = store.subscribeToAll();
  start = process.hrtime.bigint();
  let seen = 0;
  for await (const e of sub) {
    seen++;
    if (e.position === head) break;
  }
  const rate = perSecond(seen, start);
  await store.close();
  return { store: rate, raw };
}

function line(bench: string, value: number, unit: string, baseline: number, target: number) {
  const ratio = value / baseline;
  const round = (x: number) => Math.round(x * 100) / 100;
  return JSON.stringify({ bench, value: round(value), unit, baseline: round(baseline), ratio: round(ratio), target: `>= ${target}`, met: ratio >= target });
}

try {
  const file = join(dir, 'events.sqlite3');
  const store = SqliteEventStore.open(file);
  const raw = openRaw();
  const rates = { baseline: [] as number[], sequential: [] as number[], concurrent: [] as number[] };
  const commitsBefore = store.stats.commits;
  for (let round = 0; round < ROUNDS; round++) {
    rates.baseline.push(rawSingleRowCommits(raw, round));
    rates.sequential.push(await sequentialAppends(store, round));
    rates.concurrent.push(await concurrentAppends(store, round));
  }
  const commits = (store.stats.commits - commitsBefore - ROUNDS * SEQUENTIAL) / ROUNDS;
  raw.close();
  await store.close();
  const [baseline, sequential, concurrent] = [median(rates.baseline), median(rates.sequential), median(rates.concurrent)];
  const read = await catchUp(file);
  process.stderr.write(
    `raw ${baseline.toFixed(0)}/s, sequential ${sequential.toFixed(0)}/s, ` +
      `100 concurrent ${concurrent.toFixed(0)}/s in ${commits} commits for ${CONCURRENT * PER_APPENDER} appends, ` +
      `catch-up ${read.store.toFixed(0)}/s vs raw ${read.raw.toFixed(0)}/s\n`,
  );
  console.log(line('event-store-append-sequential', sequential, 'appends/s', baseline, 0.7));
  console.log(line('event-store-append-100-concurrent', concurrent, 'appends/s', baseline, 3));
  console.log(line('event-store-subscription-catch-up', read.store, 'events/s', read.raw, 0.5));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
