/**
 * Retention on the runtime's own clock (in process, real SQLite files and real native commands): nothing is aged
 * until the clock passes the policy's days, then released executions lose their output (removed: no archive) and
 * keep their records across a restart, while a running command is left alone.
 */
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { Retention } from '../../src/runtime/maintenance/retention.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import { ArtifactArchive } from '../../src/store/artifact-archive.ts';
import type { ExecutionRecord } from '../../src/runtime/runtime-api.ts';
import { caller, settled, tempDir, testProviders } from './executions-harness.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { gathered } from '../../src/runtime/core/stream-replay.ts';

const DAY = 86_400_000;
const dir = tempDir('berth-retention-clock-');
let offset = 0;
let berth: Berth;

const start = () =>
  startBerth({
    settings: { dataDir: dir.path, store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_retention',
    providers: testProviders(dir.path, false),
    retention: { days: 30 },
    now: () => Date.now() + offset,
  });

beforeAll(async () => {
  berth = await start();
}, 60_000);

afterAll(async () => {
  await berth?.stop();
  dir.remove();
});

const released = (id: string) =>
  waitFor(() => berth.api.getExecution(caller, id), { until: (r) => r.step === 'released', timeoutMs: 30_000, what: `${id} released` });

it('should age executions by the runtime clock, remove their output and keep their records across a restart', async () => {
  const env = (await berth.api.createEnvironment(caller, { name: 'retention-clock', profile: { provider: 'native' } })).id;
  const done: ExecutionRecord[] = [];
  for (const word of ['alpha', 'beta']) {
    const x = await berth.api.submitExecution(caller, { operationId: `clock-${word}`, environment: env, command: `echo ${word}-${process.pid}` });
    await settled(berth.api, x.id);
    done.push(await released(x.id));
  }
  const live = await berth.api.submitExecution(caller, { operationId: 'clock-live', environment: env, command: ['sleep', '300'] });
  await waitFor(() => berth.api.getExecution(caller, live.id), { until: (r) => r.status === 'running', timeoutMs: 30_000, what: 'running' });
  const artifacts = await Promise.all(done.map(async (x) => (await berth.runtime.actors.get('execution', x.id))!.context.artifacts.stdout));

  // Not old enough yet: nothing happens.
  expect(await berth.api.runRetention(caller)).toMatchObject({ compacted: 0 });
  offset = 29 * DAY;
  expect(await berth.api.runRetention(caller)).toMatchObject({ compacted: 0 });

  offset = 31 * DAY;
  const report = await berth.api.runRetention(caller);
  expect(report).toMatchObject({ compacted: 2, removed: 2, archived: 0, failed: 0 });
  for (const a of artifacts) expect(existsSync(join(dir.path, 'artifacts', a.digest.slice(7, 9), a.digest.slice(7)))).toBe(false);
  expect(await berth.api.runRetention(caller)).toMatchObject({ compacted: 0 });

  await berth.stop();
  berth = await start();
  for (const x of done) {
    const record = await berth.api.getExecution(caller, x.id);
    expect({ ...record, step: x.step, updatedAt: x.updatedAt }).toEqual(x);
    expect(record.step).toBe('compacted');
    // Its replay is the summary alone; the revisions before it are gone.
    const replay = await gathered(await berth.api.replay(caller, `execution-${x.id}`));
    expect(replay.map((s) => [s.event.type, s.stateAfter])).toEqual([['execution.compacted', 'compacted']]);
    expect(await gathered(await berth.api.replay(caller, `execution-${x.id}`, Number(replay[0].event.revision) - 1))).toEqual([]);
    expect(await gathered(await berth.api.replay(caller, `execution-${x.id}`, Number(replay[0].event.revision)))).toHaveLength(1);
    const read = await berth.api.readOutput(caller, x.id, 'stdout', 0).catch((e: unknown) => e);
    expect(isBerthError(read, 'output_expired'), String(read)).toBe(true);
  }
  expect((await berth.api.getExecution(caller, live.id)).status).toBe('running');
  await berth.api.cancelExecution(caller, live.id);
  await waitFor(() => berth.api.getExecution(caller, live.id), { until: (r) => r.status === 'cancelled', timeoutMs: 30_000, what: 'cancelled' });
  await released(live.id);
}, 120_000);

it('should go on past an execution it cannot compact, and try it again once nothing else is left', async () => {
  const archiveRoot = join(dir.path, '..', `${dir.path.split('/').pop()}-archive`);
  const retention = new Retention({
    actors: () => berth.runtime.actors,
    artifacts: berth.services.artifacts,
    aged: (cutoff, limit) => (berth.runtime.projections.get('activity')!.query.finishedBefore(cutoff, limit) as { id: string }[]).map((x) => x.id),
    settings: { days: 30 },
    archive: new ArtifactArchive(archiveRoot, [dir.path]),
    batch: 1,
  });
  const later = Date.now() + offset + 31 * DAY;
  const step = async () => {
    const report = await retention.run(later);
    await berth.runtime.projections.catchUp();
    return report;
  };
  // What the first test left (its cancelled sleep) goes first.
  while ((await step()).compacted > 0);

  const env = (await berth.api.createEnvironment(caller, { name: 'retention-failing', profile: { provider: 'native' } })).id;
  const ids: string[] = [];
  // Fixed outputs whose archive directories (the digest's first two hex digits: 74, 17, 76) differ, so the link
  // below blocks the first one alone. With the process id in the output, 1 run in 80 put another one behind it too.
  for (const word of ['first', 'second', 'third']) {
    const x = await berth.api.submitExecution(caller, { operationId: `failing-${word}`, environment: env, command: `echo retention-failing-${word}` });
    await settled(berth.api, x.id);
    ids.push((await released(x.id)).id);
  }
  const dirs = await Promise.all(ids.map(async (id) => (await berth.runtime.actors.get('execution', id))!.context.artifacts.stdout.digest.slice(7, 9)));
  expect(new Set(dirs).size).toBe(3);
  // The oldest one's output cannot be archived: a link stands where its archive directory belongs.
  const blocked = dirs[0]!;
  mkdirSync(archiveRoot, { recursive: true });
  symlinkSync('/tmp', join(archiveRoot, blocked));
  expect(await step()).toMatchObject({ compacted: 0, failed: 1, lastError: expect.stringMatching(/link/) });
  expect(await step()).toMatchObject({ compacted: 1, failed: 0 });
  expect(await step()).toMatchObject({ compacted: 1, failed: 0 });
  expect((await berth.api.getExecution(caller, ids[0])).step).toBe('released');
  // Nothing else is left: the failed one is tried again (and fails again while the link stands).
  expect(await step()).toMatchObject({ compacted: 0, failed: 0 });
  expect(await step()).toMatchObject({ compacted: 0, failed: 1 });
  rmSync(join(archiveRoot, blocked));
  expect(await step()).toMatchObject({ compacted: 0, failed: 0 });
  expect(await step()).toMatchObject({ compacted: 1, failed: 0, archived: 1 });
  expect((await berth.api.getExecution(caller, ids[0])).step).toBe('compacted');
  expect(readdirSync(join(archiveRoot, blocked))).toHaveLength(1);
  rmSync(archiveRoot, { recursive: true, force: true });
}, 120_000);
