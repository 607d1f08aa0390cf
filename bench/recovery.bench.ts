/**
 * Recovery of 10,000 unfinished actors of 20 events each (200,000 events), as a start does it: the projection engine
 * resumes the unfinished-actors index from its checkpoint (the runtime that wrote the events kept it), the runtime
 * rehydrates exactly the actors it lists, sends each `runtime.recovered` and waits for the inspection effects.
 * Target: at most 3 s. Baseline: a raw `readAll` scan of the same file (what a recovery by log scan must read at the
 * least), measured in the same run.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActorRuntime } from '../src/actors/actor-runtime.ts';
import { ProjectionEngine } from '../src/projections/projection-engine.ts';
import { SqliteReadModelStore } from '../src/projections/sqlite-read-model-store.ts';
import { unfinishedActorsProjection } from '../src/projections/unfinished-actors.projection.ts';
import { SqliteEventStore } from '../src/store/sqlite-event-store.ts';
import { tallyActor } from '../test/fixtures/actors/tally.actor.ts';

const ACTORS = Number(process.env.BENCH_ACTORS ?? 10_000);
const EVENTS = Number(process.env.BENCH_EVENTS_PER_ACTOR ?? 20);
const TARGET_S = 3;
const PAGE = 10_000;

const dir = mkdtempSync(join(tmpdir(), 'berth-bench-recovery-'));
const file = join(dir, 'events.sqlite3');
const seconds = (startNs: bigint) => Number(process.hrtime.bigint() - startNs) / 1e9;

/** Writes the actors' streams as a runtime would have left them: metadata, schema version, not finished. */
async function populate(store: SqliteEventStore): Promise<void> {
  const metadata = {
    runtimeId: 'bench-before',
    epoch: 1,
    actorType: 'tally',
    from: 'open',
    to: 'open',
    at: Date.now(),
    schemaVersion: 1,
    finished: false,
  };
  for (let first = 0; first < ACTORS; first += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, ACTORS - first) }, (_, k) =>
        store.append(
          `tally-a${first + k}`,
          Array.from({ length: EVENTS }, (_, r) => ({
            id: randomUUID(),
            type: 'tally.added',
            data: { n: r + 1 },
            metadata: { ...metadata, correlationId: randomUUID(), causationId: randomUUID() },
          })),
          { expectedRevision: 'no_stream' },
        ),
      ),
    );
  }
}

async function rawScan(): Promise<number> {
  const store = SqliteEventStore.open(file);
  const start = process.hrtime.bigint();
  let from: bigint | 'start' = 'start';
  let n = 0;
  for (;;) {
    const page = await store.readAll({ fromPosition: from, maxCount: PAGE });
    n += page.length;
    if (page.length < PAGE) break;
    from = page[page.length - 1].position;
  }
  const s = seconds(start);
  await store.close();
  if (n < ACTORS * EVENTS) throw new Error(`scanned ${n} events, expected ${ACTORS * EVENTS}`);
  return s;
}

/** The index as the runtime that wrote the events left it: followed as they were written, checkpointed. */
async function indexAsLeft(store: SqliteEventStore): Promise<void> {
  const models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
  const engine = new ProjectionEngine({ store, models });
  engine.register(unfinishedActorsProjection);
  await engine.start();
  await engine.catchUp();
  await engine.stop();
  models.close();
}

async function recovery(): Promise<{ s: number; report: Awaited<ReturnType<ActorRuntime['recover']>> }> {
  const store = SqliteEventStore.open(file);
  // A restart keeps its runtime id: it owns what it recovers.
  const rt = new ActorRuntime({ store, runtimeId: 'bench-before' }).register(tallyActor);
  await rt.start();
  const start = process.hrtime.bigint();
  const models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
  const engine = new ProjectionEngine({ store, models });
  const index = engine.register(unfinishedActorsProjection);
  await engine.start();
  await engine.catchUp();
  const report = await rt.recover(index.query.streams('bench-before'));
  await rt.whenIdle();
  const s = seconds(start);
  await engine.stop();
  models.close();
  await store.close();
  if (report.recovered !== ACTORS) throw new Error(`recovered ${report.recovered} of ${ACTORS} actors`);
  return { s, report };
}

try {
  const store = SqliteEventStore.open(file);
  await populate(store);
  await indexAsLeft(store);
  await store.close();
  const baseline = await rawScan();
  const { s, report } = await recovery();
  process.stderr.write(
    `raw scan of ${ACTORS * EVENTS} events ${baseline.toFixed(2)} s; recovery of ${report.actors} actors ` +
      `${s.toFixed(2)} s (recover() ${(report.ms / 1000).toFixed(2)} s, ${report.recovered} reconciled)\n`,
  );
  const r = (x: number) => Math.round(x * 100) / 100;
  console.log(
    JSON.stringify({
      bench: 'actor-recovery-10k-actors',
      value: r(s),
      unit: 's',
      baseline: r(baseline),
      ratio: r(s / baseline),
      target: `<= ${TARGET_S} s`,
      met: s <= TARGET_S,
    }),
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
