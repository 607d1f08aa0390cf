/**
 * The runtime takes what differs per provider from the provider, never from its kind: a provider registered as
 * `native` whose capabilities say otherwise gets its own ownership recorded on the allocation intent and its own
 * reuse default recorded on the environment, and its content binding decides whether an allocation binds the active
 * version when it is made (real runtime, SQLite file).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AllocationContext } from '../../../src/machines/allocation.machine.ts';
import type { EnvironmentContext } from '../../../src/machines/environment.machine.ts';
import { NativeProvider } from '../../../src/providers/native/native-provider.ts';
import type { Provider } from '../../../src/providers/provider.ts';
import { startBerth, type Berth } from '../../../src/runtime/berth.ts';
import type { Caller } from '../../../src/runtime/runtime-api.ts';
import { waitFor } from '../../fixtures/wait-for.ts';

const admin: Caller = { scope: 'default', role: 'admin' };
let dir: string;
let berth: Berth | undefined;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-provider-capabilities-'));
});
afterEach(async () => {
  await berth?.stop();
  berth = undefined;
  rmSync(dir, { recursive: true, force: true });
});

const firstData = async (b: Berth, stream: string, type: string) =>
  (await b.runtime.store.readStream(stream)).find((e) => e.type === type)?.data as Record<string, unknown>;

describe('provider capabilities', () => {
  it('records the provider\'s ownership on the intent and its reuse default on the environment', async () => {
    const provider = Object.assign(new NativeProvider({ dataDir: dir }), { ownership: 'managed', defaultReuse: 'workspace' }) as unknown as Provider;
    berth = await startBerth({ settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 60_000 }, runtimeId: 'rt_capabilities', providers: [provider] });
    const env = await berth.api.createEnvironment(admin, { name: 'capable' });
    expect(await firstData(berth, `environment-${env.id}`, 'environment.created')).toMatchObject({ reuse: 'workspace' });
    expect((await berth.runtime.actors.get<EnvironmentContext>('environment', env.id))?.context.reuse).toBe('workspace');

    const allocation = await berth.api.acquire(admin, env.id);
    expect(allocation.ownership).toBe('managed');
    expect(await firstData(berth, `allocation-${allocation.allocationId}`, 'allocation.intended')).toMatchObject({ ownership: 'managed' });
    expect((await berth.runtime.actors.get<AllocationContext>('allocation', allocation.allocationId))?.context.ownership).toBe('managed');
  });

  it('records the profile\'s own reuse policy over the provider\'s default, and the default again once the profile drops it', async () => {
    berth = await startBerth({ settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 60_000 }, runtimeId: 'rt_capabilities', providers: [new NativeProvider({ dataDir: dir })] });
    const env = await berth.api.createEnvironment(admin, { name: 'asked', profile: { reuse: 'session' } });
    expect(await firstData(berth, `environment-${env.id}`, 'environment.created')).toMatchObject({ reuse: 'session' });
    await berth.api.updateEnvironment(admin, env.id, { profile: { reuse: undefined } });
    expect(await firstData(berth, `environment-${env.id}`, 'environment.updated')).toMatchObject({ reuse: 'scope' });
    expect((await berth.runtime.actors.get<EnvironmentContext>('environment', env.id))?.context.reuse).toBe('scope');
  });

  it('binds the active content version to the allocation when the provider says content binds at allocation', async () => {
    const provider = Object.assign(new NativeProvider({ dataDir: dir }), { contentBinding: 'allocation' }) as unknown as Provider;
    berth = await startBerth({ settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 60_000 }, runtimeId: 'rt_capabilities', providers: [provider] });
    const content = berth.api.content!;
    const env = await berth.api.createEnvironment(admin, { name: 'bound' });
    const build = async () => {
      const { version } = await content.startBuild(admin, env.id);
      const what = `build ${version} to end`;
      expect(await waitFor(() => content.getBuild(admin, env.id, version), { until: (r) => r.status !== 'building', timeoutMs: 30_000, what })).toMatchObject({ status: 'ready' });
    };
    await content.writeFile(admin, env.id, 'run.sh', [Buffer.from('echo one\n')]);
    await build();
    const first = await berth.api.acquire(admin, env.id);
    expect(await firstData(berth!, `allocation-${first.allocationId}`, 'allocation.intended')).toMatchObject({ contentVersion: 1, mounts: [{ target: '/env/bound' }] });

    // Another version active: the next acquire replaces the allocation nothing holds, and the new one binds it.
    await content.writeFile(admin, env.id, 'run.sh', [Buffer.from('echo two\n')]);
    await build();
    const second = await berth.api.acquire(admin, env.id);
    expect(second.allocationId).not.toBe(first.allocationId);
    expect(await firstData(berth!, `allocation-${second.allocationId}`, 'allocation.intended')).toMatchObject({ contentVersion: 2 });
  });
});
