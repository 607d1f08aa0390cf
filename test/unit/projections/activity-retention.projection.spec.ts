/**
 * The activity model and retention (real SQLite event store and read-model tables): a compacted execution keeps its
 * row whether the model folded its whole history or only the summary a rebuild finds, leaves the retention query,
 * and stops counting its output against the scope.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { ActorRuntime } from '../../../src/actors/actor-runtime.ts';
import { compactionSummary } from '../../../src/machines/execution.machine.ts';
import { activityProjection } from '../../../src/projections/activity.projection.ts';
import { ProjectionEngine } from '../../../src/projections/projection-engine.ts';
import { SqliteReadModelStore } from '../../../src/projections/sqlite-read-model-store.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { executionActor } from '../machines/machine-actors.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-activity-retention-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const ENV = `henv_${'d'.repeat(32)}`;
const accepted = (operationId: string, at: number) => ({
  type: 'execution.accepted',
  operationId,
  inputDigest: `sha256:${operationId}`,
  environmentId: ENV,
  target: { environmentId: ENV, allocationId: 'alloc-1', generation: 1 },
  command: ['/bin/sh', '-c', 'echo hi'],
  stdin: false,
  scope: 'team-a',
  at,
});
const lifecycle = (at: number) => [
  { type: 'execution.dispatched', at: at + 1 },
  { type: 'execution.started', pid: 42, at: at + 2 },
  { type: 'execution.exited', exitCode: 3, signal: null, at: at + 3 },
  { type: 'execution.drained', sizes: { stdout: 3, stderr: 5 }, at: at + 4 },
  { type: 'execution.saved', artifacts: { stdout: { digest: 'sha256:aaa', size: 3 }, stderr: { digest: 'sha256:bbb', size: 5 } }, at: at + 5 },
  { type: 'execution.released', at: at + 6 },
];

async function modelOn(store: SqliteEventStore, file: string) {
  const models = SqliteReadModelStore.open(join(dir, file));
  const engine = new ProjectionEngine({ store, models });
  const activity = engine.register(activityProjection);
  await engine.start();
  await engine.catchUp();
  return { activity, close: async () => (await engine.stop(), models.close()) };
}

it('should keep a compacted execution\'s row alike from its whole history and from its summary alone', async () => {
  const store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
  const actors = new ActorRuntime({ store, runtimeId: 'rt_activity' }).register(executionActor);
  await actors.start();
  for (const [id, at] of [['old', 1_000], ['newer', 5_000]] as const) {
    await actors.send('execution', id, accepted(id, at));
    for (const e of lifecycle(at)) await actors.send('execution', id, e);
  }
  const live = await modelOn(store, 'live.sqlite3');
  expect(live.activity.query.finishedBefore(4_000, 10).map((x: { id: string }) => x.id)).toEqual(['old']);
  expect(live.activity.query.outputBytes('team-a')).toBe(16);

  const view = (await actors.get('execution', 'old'))!;
  await actors.send('execution', 'old', compactionSummary(view, 'removed', 90_000), { compact: true });
  const rebuilt = await modelOn(store, 'rebuilt.sqlite3');
  const head = await store.headPosition();
  for (const model of [live, rebuilt]) expect(await model.activity.waitFor(head, 5_000)).toBe(true);

  const row = live.activity.query.get('old');
  expect(row).toMatchObject({ step: 'compacted', status: 'exited', exitCode: 3, outputBytes: 8, unfinished: false, createdAt: 1_000 });
  expect(rebuilt.activity.query.get('old')).toEqual(row);
  for (const model of [live, rebuilt]) {
    expect(model.activity.query.finishedBefore(100_000, 10).map((x: { id: string }) => x.id)).toEqual(['newer']);
    expect(model.activity.query.outputBytes('team-a')).toBe(8);
    const counts = Object.entries(model.activity.query.byStatus() as Record<string, number>).filter(([, n]) => n > 0);
    expect(Object.fromEntries(counts)).toEqual({ exited: 2 });
  }
  await live.close();
  await rebuilt.close();
  await actors.whenIdle();
  await store.close();
});
