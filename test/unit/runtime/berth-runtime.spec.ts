/**
 * The composition root over a real SQLite store: each start fences a new epoch, the projections are caught up before
 * recovery runs, an unfinished actor is reconciled by recovery, and stop drains the maintenance loop.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { setup } from 'xstate';
import { z } from 'zod';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { defineActor } from '../../../src/actors/actor-type.ts';
import { defineProjection, table } from '../../../src/projections/projection.ts';
import { BerthRuntime } from '../../../src/runtime/core/berth-runtime.ts';
import { waitFor } from '../../fixtures/wait-for.ts';

const jobMachine = setup({
  types: {} as { events: { type: 'job.requested' } | { type: 'job.done' } | { type: 'runtime.recovered' } },
  actions: { inspect: () => {} },
}).createMachine({
  id: 'job',
  initial: 'idle',
  states: {
    idle: { on: { 'job.requested': 'requested' } },
    requested: { on: { 'runtime.recovered': { actions: 'inspect' }, 'job.done': 'done' } },
    done: { type: 'final' },
  },
});

const jobActor = defineActor({
  type: 'job',
  machine: jobMachine,
  events: { 'job.requested': z.object({}), 'job.done': z.object({}) },
  effects: { inspect: () => ({ type: 'job.done' }) },
});

/** Event types seen on job streams, and what recovery found when it ran. */
const jobLog = defineProjection({
  name: 'job-log',
  version: 1,
  filter: { streamPrefixes: ['job-'] },
  tables: { seen: table<{ position: string; type: string }>() },
  reduce: (t, e) => t.seen.put(e.position.toString().padStart(12, '0'), { position: e.position.toString(), type: e.type }),
  queries: { types: (t) => t.seen.all().map((x) => x.type) },
});

let dir: string;
const started: BerthRuntime[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-runtime-'));
});
afterEach(async () => {
  for (const r of started.splice(0)) await r.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function start(extra: Partial<Parameters<typeof BerthRuntime.start>[0]> = {}) {
  const runtime = await BerthRuntime.start({
    settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 60_000 },
    runtimeId: 'rt_test',
    actorTypes: [jobActor],
    projections: [jobLog],
    ...extra,
  });
  started.push(runtime);
  return runtime;
}

describe('berth runtime', () => {
  it('should fence a new epoch at every start and reconcile an unfinished actor after catching projections up', async () => {
    const first = await start();
    expect(first.identity).toEqual({ runtimeId: 'rt_test', epoch: 1 });
    await first.actors.send('job', 'j1', { type: 'job.requested' });
    await first.stop();
    started.length = 0;

    let seenAtRecovery: string[] | undefined;
    const second = await start({
      projections: [
        {
          ...jobLog,
          reduce: (t, e) => {
            if (e.type === 'runtime.recovered' && !seenAtRecovery) seenAtRecovery = t.seen.all().map((x) => x.type);
            jobLog.reduce(t, e);
          },
        },
      ],
    });
    expect(second.identity.epoch).toBe(2);
    expect(second.recovery).toMatchObject({ actors: 1, recovered: 1, failed: 0 });
    await second.actors.whenIdle();
    expect(await second.actors.get('job', 'j1')).toMatchObject({ state: 'done', finished: true });
    const model = second.projections.get('job-log')!;
    expect(await model.waitFor(await second.store.headPosition(), 5000)).toBe(true);
    expect(model.query.types()).toEqual(['job.requested', 'runtime.recovered', 'job.done']);
    // The read model already held the pre-crash history when recovery wrote its first event.
    expect(seenAtRecovery).toEqual(['job.requested']);
  });

  it('should let a running maintenance tick finish before stop closes the store', async () => {
    const trace: string[] = [];
    const runtime = await start({
      maintenanceTasks: [
        {
          name: 'slow',
          run: async () => {
            trace.push('tick started');
            await sleep(300); // the scenario: a slow task, still running when stop is called
            await runtime.store.headPosition(); // would throw if the store were already closed
            trace.push('tick finished');
          },
        },
      ],
    });
    const tick = runtime.maintenance.tick();
    await waitFor(() => trace.includes('tick started'), { intervalMs: 1, what: 'the tick under way' });
    await runtime.stop();
    trace.push('stopped');
    await tick;
    expect(trace).toEqual(['tick started', 'tick finished', 'stopped']);
    expect(runtime.maintenance.stats.failures).toBe(0);
  });

  it('should run the maintenance loop on its interval', async () => {
    let runs = 0;
    const runtime = await start({
      settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 30 },
      maintenanceTasks: [{ name: 'count', run: async () => void runs++ }],
    });
    await waitFor(() => runs >= 2, { timeoutMs: 5_000, what: 'two runs of the 30 ms loop' });
    await runtime.stop();
    expect(runs).toBeGreaterThanOrEqual(2);
  });
});
