/**
 * Per-provider defaults are recorded in the events (ownership on `allocation.intended`, the reuse policy on
 * `environment.created`/`updated`), so machines never ask a provider. Streams written before they were recorded
 * replay from a real store exactly as they did: the kind's old default stands in for the missing field.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../../src/actors/actor-runtime.ts';
import { decisionEventId } from '../../../src/actors/event-id.ts';
import type { AllocationContext } from '../../../src/machines/allocation.machine.ts';
import type { EnvironmentContext } from '../../../src/machines/environment.machine.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import { allocationActor, environmentActor } from './machine-actors.ts';

const ENV = `henv_${'b'.repeat(32)}`;
let dir: string;
let store: SqliteEventStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-provider-defaults-'));
  store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Appends events as the Berth of their shape wrote them (schemaVersion 1, no runtime of this test). */
async function written(stream: string, events: { type: string; data: Record<string, unknown> }[]) {
  await store.append(
    stream,
    events.map((e, i) => ({
      id: decisionEventId(stream, BigInt(i), { runtimeId: 'old', epoch: 1 }, e.type, e.data),
      type: e.type,
      data: e.data,
      metadata: { schemaVersion: 1 },
    })),
    { expectedRevision: 'no_stream' },
  );
}

async function replayed<C>(type: 'environment' | 'allocation', id: string): Promise<C> {
  const rt = new ActorRuntime({ store, runtimeId: 'rt-new', services: {} });
  rt.register(environmentActor);
  rt.register(allocationActor);
  const view = await rt.get<C>(type, id);
  await rt.whenIdle();
  return view!.context;
}

const intent = (profile: object, extra: object = {}) => ({
  type: 'allocation.intended',
  data: { environmentId: ENV, requestId: 'hreq_1', generation: 1, profile, ...extra, at: 1_000 },
});
const created = (profile: object, extra: object = {}) => ({
  type: 'environment.created',
  data: { name: 'Studio', slug: 'studio', scope: 'team-a', profile, ...extra, at: 1_000 },
});

describe('provider defaults recorded in events', () => {
  it('replays an intent written before ownership was recorded with its kind\'s old default', async () => {
    await written('allocation-halloc_native', [intent({ provider: 'native' })]);
    await written('allocation-halloc_docker', [intent({ provider: 'docker' })]);
    expect((await replayed<AllocationContext>('allocation', 'halloc_native')).ownership).toBe('borrowed');
    expect((await replayed<AllocationContext>('allocation', 'halloc_docker')).ownership).toBe('managed');
  });

  it('takes the ownership the intent records over any kind\'s', async () => {
    await written('allocation-halloc_recorded', [intent({ provider: 'native' }, { ownership: 'managed' })]);
    expect((await replayed<AllocationContext>('allocation', 'halloc_recorded')).ownership).toBe('managed');
  });

  it('replays environments written before the reuse policy was recorded with their kind\'s old default', async () => {
    await written(`environment-${ENV}`, [
      created({ provider: 'docker' }),
      { type: 'environment.updated', data: { name: 'Renamed', at: 1_100 } },
    ]);
    expect((await replayed<EnvironmentContext>('environment', ENV)).reuse).toBe('session');
  });

  it('takes the reuse policy the event records, and keeps it across an update that leaves the profile alone', async () => {
    await written(`environment-${ENV}`, [
      created({ provider: 'docker' }, { reuse: 'workspace' }),
      { type: 'environment.updated', data: { name: 'Renamed', at: 1_100 } },
    ]);
    expect((await replayed<EnvironmentContext>('environment', ENV)).reuse).toBe('workspace');
  });

  it('takes the reuse policy recorded with a new profile, or the old default of an update written before', async () => {
    await written(`environment-${ENV}`, [
      created({ provider: 'native' }, { reuse: 'scope' }),
      { type: 'environment.updated', data: { profile: { provider: 'native' }, reuse: 'session', at: 1_100 } },
    ]);
    expect((await replayed<EnvironmentContext>('environment', ENV)).reuse).toBe('session');
    const OLD = `henv_${'c'.repeat(32)}`;
    await written(`environment-${OLD}`, [
      { ...created({ provider: 'native' }) },
      { type: 'environment.updated', data: { profile: { provider: 'docker' }, at: 1_100 } },
    ]);
    expect((await replayed<EnvironmentContext>('environment', OLD)).reuse).toBe('session');
  });
});
