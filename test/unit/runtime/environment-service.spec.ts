/**
 * The environment service over a real runtime (SQLite file, native provider, no Docker): coalesced acquisition,
 * uses and their fate across a restart, the catalog's strictly increasing per-resource `updatedAt`, the
 * active-allocation index, selection without allocation, and provider_missing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../../schemas/errors.ts';
import type { EnvironmentContext } from '../../../src/machines/environment.machine.ts';
import type { CatalogEntry } from '../../../src/projections/catalog.projection.ts';
import { NativeProvider } from '../../../src/providers/native/native-provider.ts';
import { startBerth, type Berth } from '../../../src/runtime/berth.ts';
import type { Caller } from '../../../src/runtime/runtime-api.ts';

const admin: Caller = { scope: 'default', role: 'admin' };
let dir: string;
let berth: Berth | undefined;

async function start(): Promise<Berth> {
  berth = await startBerth({
    settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 60_000 },
    runtimeId: 'rt_env_service',
    providers: [new NativeProvider({ dataDir: dir })],
  });
  return berth;
}

async function restart(): Promise<Berth> {
  await berth?.stop();
  return start();
}

const eventTypes = async (b: Berth, stream: string) => (await b.runtime.store.readStream(stream)).map((e) => e.type);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-env-service-'));
});
afterEach(async () => {
  await berth?.stop();
  berth = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe('environment service', () => {
  it('should coalesce concurrent acquires onto one requested allocation', async () => {
    const b = await start();
    const env = await b.api.createEnvironment(admin, { name: 'host' });
    const answers = await Promise.all(Array.from({ length: 30 }, () => b.api.acquire(admin, env.id)));
    expect(new Set(answers.map((a) => a.allocationId)).size).toBe(1);
    expect(answers[0]).toMatchObject({ state: 'ready', provider: 'native', ownership: 'borrowed', generation: 1 });
    const types = await eventTypes(b, `environment-${env.id}`);
    expect(types.filter((t) => t === 'environment.acquisition_requested')).toHaveLength(1);
  });

  it('should stamp a strictly increasing catalog updatedAt per environment, equal to the actor\'s', async () => {
    let b = await start();
    const env = await b.api.createEnvironment(admin, { name: 'stamped' });
    const other = await b.api.createEnvironment(admin, { name: 'other' });
    const seen: number[] = [];
    const record = async () => {
      await b.runtime.projections.catchUp();
      const entry = b.runtime.projections.get('catalog')!.query.get(env.id) as CatalogEntry;
      expect(entry.updatedAt).toBe((await b.runtime.actors.get<EnvironmentContext>('environment', env.id))!.context.updatedAt);
      seen.push(entry.updatedAt);
    };
    await record();
    // Several changes inside the same millisecond still move it forward.
    await Promise.all([b.api.updateEnvironment(admin, env.id, { description: 'a' }), b.api.acquire(admin, other.id)]);
    await record();
    const a = await b.api.acquire(admin, env.id);
    await record();
    await b.api.release(admin, env.id, a.allocationId);
    await record();
    await b.api.updateEnvironment(admin, env.id, { name: 'stamped again' });
    await record();
    for (let i = 1; i < seen.length; i++) expect(seen[i]).toBeGreaterThan(seen[i - 1]);
    // A restart changes nothing, so it does not move; the rebuilt catalog and the rehydrated actor still agree.
    b = await restart();
    await record();
    expect(seen[seen.length - 1]).toBe(seen[seen.length - 2]);
    seen.pop();
    const changes = (await eventTypes(b, `environment-${env.id}`)).filter((t) => t !== 'runtime.recovered');
    expect(seen[seen.length - 1] - seen[0]).toBeGreaterThanOrEqual(changes.length - 1);
  });

  it('should list live allocations and retained uses, drop admission uses of a gone epoch at recovery, keep the others', async () => {
    let b = await start();
    const env = await b.api.createEnvironment(admin, { name: 'used' });
    const a = await b.api.acquire(admin, env.id);
    await b.api.environments.acquireUse(admin, env.id, a.allocationId, 'admission', 'huse_admission');
    await b.api.environments.acquireUse(admin, env.id, a.allocationId, 'physical', 'huse_physical');
    await b.runtime.projections.catchUp();
    const index = b.runtime.projections.get('active-allocations')!;
    expect(((await b.api.activeAllocations(admin)).items).map((x) => x.allocationId)).toEqual([a.allocationId]);
    expect((index.query.retainedUses() as { useId: string }[]).map((u) => u.useId).sort()).toEqual(['huse_admission', 'huse_physical']);
    expect(isBerthError(await b.api.release(admin, env.id, a.allocationId).catch((e) => e), 'environment_busy')).toBe(true);

    b = await restart();
    const retained = b.runtime.projections.get('active-allocations')!.query.retainedUses() as { useId: string; kind: string }[];
    expect(retained.map((u) => [u.useId, u.kind])).toEqual([['huse_physical', 'physical']]);
    expect((await b.api.environments.allocationView(a.allocationId)).uses).toEqual([{ useId: 'huse_physical', kind: 'physical' }]);
    expect(isBerthError(await b.api.release(admin, env.id, a.allocationId).catch((e) => e), 'environment_busy')).toBe(true);

    await b.api.environments.releaseUse(admin, env.id, a.allocationId, 'huse_physical');
    expect((await b.api.release(admin, env.id, a.allocationId)).state).toBe('released');
    await b.runtime.projections.catchUp();
    expect((await b.api.activeAllocations(admin)).items).toEqual([]);
  });

  it('should reconcile an allocated environment at a restart without sending it what it already knows', async () => {
    let b = await start();
    const env = await b.api.createEnvironment(admin, { name: 'kept' });
    const a = await b.api.acquire(admin, env.id);
    b = await restart();
    await b.runtime.actors.whenIdle();
    // Recovery re-sent the intent, which the allocation refused as already made (the one refusal, by design), saying
    // `environment.allocated` may have been missed. The environment's state already said so: sent back anyway, it was
    // refused too (a second refusal, and a warning with a stack at every restart, per environment).
    expect(b.runtime.actors.stats).toMatchObject({ rejected: 1, effectsFailed: 0 });
    expect(await eventTypes(b, `environment-${env.id}`)).toContain('runtime.recovered');
    expect((await b.api.acquire(admin, env.id)).allocationId).toBe(a.allocationId);
  });

  it('should select an environment for a session without allocating anything', async () => {
    const b = await start();
    const env = await b.api.createEnvironment(admin, { name: 'selected' });
    const parent = await b.api.createSession(admin, { environmentId: env.id });
    const child = await b.api.createSession(admin, { parentId: parent.id });
    expect(child.environmentId).toBe(env.id);
    expect((await b.api.getEnvironment(admin, env.id)).state).toBe('idle');
    expect(await eventTypes(b, `environment-${env.id}`)).toEqual(['environment.created']);
    expect((await b.api.activeAllocations(admin)).items).toEqual([]);
  });

  it('should refuse a profile naming a provider that is not registered with provider_missing', async () => {
    const b = await start();
    const refused = await b.api.createEnvironment(admin, { name: 'boxed', profile: { provider: 'docker' } }).catch((e) => e);
    expect(isBerthError(refused, 'provider_missing')).toBe(true);
    expect(refused.detail).toMatchObject({ provider: 'docker', registered: ['native'] });
    expect((await b.api.listEnvironments(admin)).items).toEqual([]);
  });
});
