/**
 * Leases across a restart of the runtime on a real Docker engine (issue 15): a hold survives and its timer stays
 * stopped, a pause's timer fires at its original retryAt, and a spawn refused by a quota pauses the lease (suspend)
 * until the quota is raised and the timer retries the acquire.
 */
import { chmodSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import { defaultRolePolicy } from '../../src/runtime/role-policy.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { countLabelled, testProviders } from './environments-berth.ts';
import { dockerAvailable, newTestRun, removeTestResources } from './docker-env.ts';

const run = newTestRun();
const admin: Caller = { scope: 'default', role: 'admin' };
const alice: Caller = { scope: 'alice', role: 'member' };
const docker = { provider: 'docker' } as const;
let dir: string;
let berth: Berth | undefined;
let clock = Date.now();

/** The runtime on the spec's data directory (again after `berth.stop()`: a restart), alice's environments quota at `environments`. */
async function start(environments = 100): Promise<Berth> {
  berth = await startBerth({
    settings: { dataDir: join(dir, 'data'), store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_leases_restart',
    providers: testProviders(join(dir, 'data'), { extraLabels: run }),
    workspaceRoots: [{ scope: 'default', storageId: 'repo', root: join(dir, 'repo') }],
    policy: { ceilings: defaultRolePolicy.ceilings, quotas: { ...defaultRolePolicy.quotas, environments } },
    now: () => clock,
  });
  return berth;
}

async function restart(environments?: number): Promise<Berth> {
  await berth!.stop();
  berth = undefined;
  return start(environments);
}

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-leases-restart-')));
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'repo'));
  clock = Date.now();
});
afterEach(async () => {
  await berth?.stop();
  berth = undefined;
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => removeTestResources(run));

const containersOf = async (environmentId: string) => (await countLabelled(LABEL.environmentId, environmentId)).containers;
/** The lease's machine as its view names it. */
const machineOf = ({ target }: { target: { allocationId: string; generation: number } }) => ({ allocationId: target.allocationId, generation: target.generation });

describe.skipIf(!dockerAvailable)('leases across a restart (Docker)', () => {
  it('a hold survives a restart with its timer stopped; only resume ends it', async () => {
    let b = await start();
    await b.api.leases.bind(admin, { key: 'held-1', work: { kind: 'step', id: 'h1' }, profile: docker, idleSeconds: 3600 });
    const first = await b.api.leases.acquire(admin, 'held-1');
    const retryAt = clock + 10_000;
    await b.api.leases.pause(admin, 'held-1', { cause: { kind: 'rate_limited' }, retryAt });
    await b.api.leases.hold(admin, 'held-1');

    b = await restart();
    const held = await b.api.leases.get(admin, 'held-1');
    expect(held).toMatchObject({ state: 'held', pause: { state: 'held', cause: { kind: 'rate_limited' }, retryAt: null }, machine: machineOf(first) });
    // Past the pause's old retry time: nothing resumes it.
    await b.api.leases.tick(retryAt + 1);
    expect(await b.api.leases.get(admin, 'held-1')).toMatchObject({ state: 'held', machine: machineOf(first) });
    await expect(b.api.leases.acquire(admin, 'held-1')).rejects.toMatchObject({ code: 'invalid_state', detail: { reason: 'held' } });

    expect(await b.api.leases.resume(admin, 'held-1')).toMatchObject({ state: 'running', pause: null });
    expect(await b.api.leases.acquire(admin, 'held-1')).toMatchObject({ reused: true, target: first.target });
    expect(await containersOf(first.target.environmentId)).toBe(1);
    await b.api.leases.release(admin, 'held-1');
  });

  it("a paused lease's timer fires after a restart at its original retryAt", async () => {
    let b = await start();
    await b.api.leases.bind(admin, { key: 'paused-1', work: { kind: 'step', id: 'p1' }, profile: docker, idleSeconds: 3600 });
    const first = await b.api.leases.acquire(admin, 'paused-1');
    const retryAt = clock + 30_000;
    await b.api.leases.pause(admin, 'paused-1', { cause: { kind: 'rate_limited' }, retryAt });

    clock += 20_000; // the restart happens later: the timer is not restarted from it
    b = await restart();
    expect(await b.api.leases.get(admin, 'paused-1')).toMatchObject({ state: 'paused', pause: { retryAt, attempt: 1 } });
    await b.api.leases.tick(retryAt - 1);
    expect((await b.api.leases.get(admin, 'paused-1')).state).toBe('paused');
    await b.api.leases.tick(retryAt);
    expect(await b.api.leases.get(admin, 'paused-1')).toMatchObject({ state: 'running', pause: null, machine: machineOf(first) });
    expect(await b.api.leases.acquire(admin, 'paused-1')).toMatchObject({ reused: true, target: first.target });
    await b.api.leases.release(admin, 'paused-1');
  });

  /** Alice's lease, its acquire refused by the environments quota (her one environment uses it) and so paused. */
  async function refusedLease(b: Berth, key: string): Promise<number> {
    await b.api.createEnvironment(alice, { name: `uses-the-quota-${key}`, profile: docker });
    await b.api.leases.bind(alice, { key, work: { kind: 'step', id: key }, profile: docker });
    // Without suspend the step fails with the refusal itself, and the lease is not paused.
    await expect(b.api.leases.acquire(alice, key)).rejects.toMatchObject({ code: 'quota_exceeded' });
    expect((await b.api.leases.get(alice, key)).state).toBe('running');
    await expect(b.api.leases.acquire(alice, key, { suspend: true })).rejects.toMatchObject({ code: 'invalid_state', detail: { reason: 'paused', cause: 'quota_exceeded' } });
    const paused = await b.api.leases.get(alice, key);
    expect(paused).toMatchObject({ state: 'paused', machine: null, environmentId: null, pause: { state: 'paused', cause: { kind: 'spawn_refused' }, attempt: 1 } });
    expect(paused.pause!.retryAt!).toBeGreaterThan(clock);
    return paused.pause!.retryAt!;
  }

  it('a spawn refused by the environments quota pauses the lease (suspend); raised after a restart, resume and acquire work', async () => {
    await refusedLease(await start(1), 'quota-1');
    const b = await restart(2);
    expect((await b.api.leases.get(alice, 'quota-1')).state).toBe('paused');
    expect(await b.api.leases.resume(alice, 'quota-1')).toMatchObject({ state: 'running', pause: null });
    const acquired = await b.api.leases.acquire(alice, 'quota-1');
    expect(acquired).toMatchObject({ reused: false, target: { generation: 1 } });
    expect(await containersOf(acquired.target.environmentId)).toBe(1);
    await b.api.leases.release(alice, 'quota-1');
  });

  it("the timer retries a refused spawn as the lease's member: still refused, it pauses again; raised, it acquires", async () => {
    let b = await start(1);
    const retryAt = await refusedLease(b, 'quota-2');
    await b.api.leases.tick(retryAt);
    const again = await b.api.leases.get(alice, 'quota-2');
    expect(again).toMatchObject({ state: 'paused', machine: null, pause: { cause: { kind: 'spawn_refused' }, attempt: 2 } });
    expect(again.pause!.retryAt!).toBeGreaterThan(retryAt);

    b = await restart(2);
    await b.api.leases.tick(again.pause!.retryAt! - 1);
    expect((await b.api.leases.get(alice, 'quota-2')).state).toBe('paused');
    await b.api.leases.tick(again.pause!.retryAt!);
    const acquired = await b.api.leases.get(alice, 'quota-2');
    expect(acquired).toMatchObject({ state: 'running', pause: null, machine: { generation: 1 } });
    expect(await containersOf(acquired.environmentId!)).toBe(1);
    await b.api.leases.release(alice, 'quota-2');
  });
});
