/**
 * What retention's compaction costs the SQLite store: compacting a finished execution's stream (9 events and a
 * snapshot stream) to its summary, one stream after another, against the raw baseline of appending the same summary
 * to such a stream without removing anything (one FULL-synchronous commit each, the floor of any write). Same file,
 * same run; the two sides' writes alternate one for one, and each side keeps its median over the rounds.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteEventStore } from '../src/store/sqlite-event-store.ts';
import { figure, median } from './figure.ts';

const STREAMS = Number(process.env.BENCH_STREAMS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const HISTORY = ['accepted', 'dispatched', 'started', 'exited', 'drained', 'saved', 'released', 'recovered', 'released2'];

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-retention-'));
const event = (type: string) => ({
  id: randomUUID(),
  type: `execution.${type}`,
  data: { at: Date.now(), command: ['sh', '-c', 'echo hello'], digest: `sha256:${'0'.repeat(64)}` },
  metadata: { runtimeId: 'bench', epoch: 1, actorType: 'execution' },
});

/** `STREAMS` finished execution streams (and a snapshot stream each), written in one go: not timed. */
async function finishedStreams(store: SqliteEventStore, prefix: string): Promise<string[]> {
  const streams = Array.from({ length: STREAMS }, (_, i) => `execution-${prefix}-${i}`);
  await Promise.all(
    streams.flatMap((s) => [
      store.append(s, HISTORY.map(event), { expectedRevision: 'no_stream' }),
      store.append(`snapshot-${s}`, [event('snapshot')], { expectedRevision: 'no_stream' }),
    ]),
  );
  return streams;
}

const last = BigInt(HISTORY.length - 1);

/** Seconds one write takes. */
async function timed(write: () => Promise<unknown>): Promise<number> {
  const start = process.hrtime.bigint();
  await write();
  return Number(process.hrtime.bigint() - start) / 1e9;
}

/**
 * One round: compactions and plain appends interleaved one for one (the order alternating), so both sides meet the
 * same disk: flush times on a shared machine drift more between rounds than between neighbouring writes.
 */
async function round(store: SqliteEventStore, n: number): Promise<{ compacted: number; appended: number }> {
  const a = await finishedStreams(store, `c${n}`);
  const b = await finishedStreams(store, `a${n}`);
  let compacting = 0;
  let appending = 0;
  for (let i = 0; i < STREAMS; i++) {
    const compact = () => store.compactStream(a[i], event('compacted'), { expectedRevision: last, dropStreams: [`snapshot-${a[i]}`] });
    const append = () => store.append(b[i], [event('compacted')], { expectedRevision: last });
    if (i % 2 === 0) {
      compacting += await timed(compact);
      appending += await timed(append);
    } else {
      appending += await timed(append);
      compacting += await timed(compact);
    }
  }
  return { compacted: STREAMS / compacting, appended: STREAMS / appending };
}

const store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
try {
  const compacted: number[] = [];
  const appended: number[] = [];
  for (let n = 0; n < ROUNDS; n++) {
    const r = await round(store, n);
    compacted.push(r.compacted);
    appended.push(r.appended);
    console.error(`round ${n}: ${r.compacted.toFixed(0)} compactions/s, ${r.appended.toFixed(0)} appends/s`);
  }
  figure('retention-compaction', median(compacted), 'streams/s', median(appended), { op: '>=', ratio: 0.5 });
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
