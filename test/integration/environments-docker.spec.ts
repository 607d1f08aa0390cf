/**
 * Environments on a real Docker engine through the runtime API (issue 3): what acquire creates and release removes,
 * coalesced acquisition, loss and fencing seen by the maintenance loop, uses blocking release, idle reclamation,
 * sessions that allocate nothing, and an unreachable engine that loses nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import type { Profile } from '../../schemas/profile.ts';
import { LABEL } from '../../src/providers/docker/labels.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import type { AllocationView } from '../../src/runtime/runtime-api.ts';
import { dockerAvailable, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { admin, countLabelled, startTestBerth, type TestBerthOptions } from './environments-berth.ts';

const run = newTestRun();
let dir: string;
const running: Berth[] = [];

async function start(opts: TestBerthOptions = {}): Promise<Berth> {
  const berth = await startTestBerth(dir, { docker: { extraLabels: run }, ...opts });
  running.push(berth);
  return berth;
}

async function stop(berth: Berth): Promise<void> {
  running.splice(running.indexOf(berth), 1);
  await berth.stop();
}

const createDocker = (berth: Berth, profile: Partial<Profile> = {}, name = `docker ${Math.random().toString(36).slice(2, 8)}`) =>
  berth.api.createEnvironment(admin, { name, profile: { provider: 'docker', ...profile } });

const containerOf = async (a: AllocationView) => {
  const [c] = await rawDocker.listContainers({ all: true, filters: { label: [`${LABEL.allocationId}=${a.allocationId}`] } });
  return rawDocker.getContainer(c.Id).inspect();
};

const allocationState = async (berth: Berth, allocationId: string) => (await berth.api.environments.allocationView(allocationId)).state;

/** Resolves once the environment is in `state` (it hears of its allocation's changes just after them). */
const environmentReaches = (berth: Berth, environmentId: string, state: string) =>
  waitFor(async () => (await berth.api.getEnvironment(admin, environmentId)).state, { until: (s) => s === state, timeoutMs: 5_000, what: `environment ${state}` });

/** Resolves once the allocation is in `state` (polling the actor). */
const reaches = (berth: Berth, allocationId: string, state: string, timeoutMs = 20_000) =>
  waitFor(() => allocationState(berth, allocationId), { until: (s) => s === state, timeoutMs, what: `allocation ${state}` });

/** Resolves once `n` more maintenance ticks have completed: what a tick would change, it has had the chance to. */
async function ticksPass(berth: Berth, n: number): Promise<void> {
  const { stats } = berth.runtime.maintenance;
  const target = stats.ticks + n;
  await waitFor(() => stats.ticks >= target, { timeoutMs: 20_000, what: `${n} maintenance ticks` });
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-envs-docker-'));
});
afterEach(async () => {
  for (const b of running.splice(0)) await b.stop();
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => removeTestResources(run));

describe.skipIf(!dockerAvailable)('Environments on Docker through the runtime', () => {
  it('should allocate a locked-down, labelled container on its own network, and release it without leftovers', async () => {
    const berth = await start();
    const env = await createDocker(berth, { memoryMb: 256, pidsLimit: 64, cpus: 0.5 });
    expect(env.availability).toBe('available');
    const a = await berth.api.acquire(admin, env.id);
    expect(a).toMatchObject({ environmentId: env.id, generation: 1, state: 'ready', provider: 'docker', ownership: 'managed' });

    const info = await containerOf(a);
    expect(info.Id).toBe(a.identity?.resourceId);
    expect(info.State.Running).toBe(true);
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(info.HostConfig.CapDrop).toEqual(['ALL']);
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges');
    expect(info.Config.User).toBe('1000:1000');
    expect(info.HostConfig.PidsLimit).toBe(64);
    expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024);
    expect(info.HostConfig.NanoCpus).toBe(500_000_000);
    const requestId = info.Config.Labels[LABEL.requestId];
    expect(info.Config.Labels).toMatchObject({
      [LABEL.managed]: 'true',
      [LABEL.environmentId]: env.id,
      [LABEL.allocationId]: a.allocationId,
      [LABEL.generation]: '1',
    });
    expect(requestId).toMatch(/^hreq_/);
    const networkMode = info.HostConfig.NetworkMode!;
    expect(['default', 'bridge', 'host', 'none']).not.toContain(networkMode);
    const network = await rawDocker.getNetwork(networkMode).inspect();
    expect(network.Driver).toBe('bridge');
    expect(network.Labels?.[LABEL.allocationId]).toBe(a.allocationId);
    expect(await countLabelled(LABEL.requestId, requestId)).toEqual({ containers: 1, networks: 1, volumes: 2 });

    const released = await berth.api.release(admin, env.id, a.allocationId);
    expect(released.state).toBe('released');
    expect(await countLabelled(LABEL.requestId, requestId)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    expect(await countLabelled(LABEL.environmentId, env.id)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    expect((await berth.api.getEnvironment(admin, env.id)).state).toBe('idle');
    expect((await berth.api.activeAllocations(admin)).items).toEqual([]);
  });

  it('should give 50 concurrent acquires of one environment one allocation and one container', async () => {
    const berth = await start();
    const env = await createDocker(berth);
    const answers = await Promise.all(Array.from({ length: 50 }, () => berth.api.acquire(admin, env.id)));
    expect(new Set(answers.map((a) => a.allocationId)).size).toBe(1);
    expect(answers.every((a) => a.state === 'ready' && a.generation === 1)).toBe(true);
    expect((await countLabelled(LABEL.environmentId, env.id)).containers).toBe(1);
    expect((await berth.api.listAllocations(admin, env.id)).items).toHaveLength(1);
  });

  it('should refuse release while a use is held (environment_busy) and release once it is given back', async () => {
    const berth = await start();
    const env = await createDocker(berth);
    const a = await berth.api.acquire(admin, env.id);
    const held = await berth.api.environments.acquireUse(admin, env.id, a.allocationId, 'physical', 'huse_test');
    expect(held.uses).toEqual([{ useId: 'huse_test', kind: 'physical' }]);

    const refused = await berth.api.release(admin, env.id, a.allocationId).catch((e) => e);
    expect(isBerthError(refused, 'environment_busy')).toBe(true);
    expect((await containerOf(a)).State.Running).toBe(true);

    await berth.api.environments.releaseUse(admin, env.id, a.allocationId, 'huse_test');
    expect((await berth.api.release(admin, env.id, a.allocationId)).state).toBe('released');
    expect((await countLabelled(LABEL.environmentId, env.id)).containers).toBe(0);
  });

  it('should mark a container removed behind its back lost, keep its uses, and never recreate it', async () => {
    const berth = await start({ maintenanceMs: 150 });
    const env = await createDocker(berth);
    const a = await berth.api.acquire(admin, env.id);
    await berth.api.environments.acquireUse(admin, env.id, a.allocationId, 'physical', 'huse_kept');
    // Maintenance looks at a healthy allocation without writing: ticks go by, its stream does not grow.
    const revision = async () => (await berth.runtime.actors.get('allocation', a.allocationId))!.revision;
    const before = await revision();
    await ticksPass(berth, 3);
    expect(await revision()).toBe(before);

    await rawDocker.getContainer(a.identity!.resourceId).remove({ force: true });
    await reaches(berth, a.allocationId, 'lost');
    await environmentReaches(berth, env.id, 'lost');
    await ticksPass(berth, 3);
    expect((await countLabelled(LABEL.environmentId, env.id)).containers).toBe(0);
    const lost = await berth.api.environments.allocationView(a.allocationId);
    expect(lost.state).toBe('lost');
    expect(lost.uses).toEqual([{ useId: 'huse_kept', kind: 'physical' }]);
    const index = (await berth.api.activeAllocations(admin)).items;
    expect(index.map((x) => [x.allocationId, x.state])).toEqual([[a.allocationId, 'lost']]);

    // Once its use is given back, the remains (network, volume) are released explicitly; a new acquire is generation 2.
    await berth.api.environments.releaseUse(admin, env.id, a.allocationId, 'huse_kept');
    expect((await berth.api.release(admin, env.id, a.allocationId)).state).toBe('released');
    expect(await countLabelled(LABEL.allocationId, a.allocationId)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    const next = await berth.api.acquire(admin, env.id);
    expect(next.generation).toBe(2);
    expect(next.allocationId).not.toBe(a.allocationId);
  });

  it('should fence a container restarted behind its back, never adopt it, and release it before allocating anew', async () => {
    const berth = await start({ maintenanceMs: 150 });
    const env = await createDocker(berth);
    const a = await berth.api.acquire(admin, env.id);
    await rawDocker.getContainer(a.identity!.resourceId).restart({ t: 0 });
    const now = await rawDocker.getContainer(a.identity!.resourceId).inspect();
    expect(`${now.Id}@${now.State.StartedAt}`).not.toBe(a.identity?.incarnation);
    await reaches(berth, a.allocationId, 'fenced');
    await environmentReaches(berth, env.id, 'lost');
    await ticksPass(berth, 3); // the running new incarnation is still not adopted
    expect(await allocationState(berth, a.allocationId)).toBe('fenced');
    // Admission refuses the fenced incarnation: a use cannot be taken on it.
    const refused = await berth.api.environments.acquireUse(admin, env.id, a.allocationId, 'physical').catch((e) => e);
    expect(isBerthError(refused, 'stale_target')).toBe(true);

    // A new allocation needs the fenced one gone first: acquire releases it, then allocates generation 2, so the
    // environment never has two containers.
    const concurrent = await Promise.all([1, 2, 3].map(() => berth.api.acquire(admin, env.id)));
    expect(new Set(concurrent.map((x) => x.allocationId)).size).toBe(1);
    expect(concurrent[0]).toMatchObject({ generation: 2, state: 'ready' });
    expect(await allocationState(berth, a.allocationId)).toBe('released');
    const left = await rawDocker.listContainers({ all: true, filters: { label: [`${LABEL.environmentId}=${env.id}`] } });
    expect(left.map((c) => c.Id)).toEqual([concurrent[0].identity!.resourceId]);
  });

  it('should reclaim an idle managed allocation and keep a borrowed native one', async () => {
    const berth = await start({ maintenanceMs: 200 });
    const docker = await createDocker(berth, { idleSeconds: 1 });
    const native = await berth.api.createEnvironment(admin, { name: 'host', profile: { provider: 'native', idleSeconds: 1 } });
    const d = await berth.api.acquire(admin, docker.id);
    const n = await berth.api.acquire(admin, native.id);
    expect(n).toMatchObject({ provider: 'native', ownership: 'borrowed', state: 'ready' });

    await reaches(berth, d.allocationId, 'released', 10_000);
    expect((await countLabelled(LABEL.environmentId, docker.id)).containers).toBe(0);
    await environmentReaches(berth, docker.id, 'idle');
    expect(await allocationState(berth, n.allocationId)).toBe('ready');
    expect((await berth.api.getEnvironment(admin, native.id)).state).toBe('allocated');
  });

  it('should allocate nothing for a session until work is admitted', async () => {
    const berth = await start();
    const env = await createDocker(berth);
    const session = await berth.api.createSession(admin, { environmentId: env.id });
    expect(session.environmentId).toBe(env.id);
    await sleep(300); // the scenario: a while with no work, in which nothing may be allocated
    expect((await countLabelled(LABEL.environmentId, env.id)).containers).toBe(0);
    expect((await berth.api.getEnvironment(admin, env.id)).state).toBe('idle');

    const execution = await berth.api.submitExecution(admin, { operationId: 'op-session-1', session: session.id, command: ['echo', 'hi'] });
    expect(execution.target.environmentId).toBe(env.id);
    expect((await countLabelled(LABEL.environmentId, env.id)).containers).toBe(1);
    const done = await berth.api.getExecution(admin, execution.id, 30_000);
    expect(done).toMatchObject({ status: 'exited', exitCode: 0 });
  });

  it('should answer environment_invalid when the engine lacks the image, with nothing allocated', async () => {
    const berth = await start();
    const env = await createDocker(berth, { image: 'berth-absent-image:none' });
    const refused = await berth.api.acquire(admin, env.id).catch((e) => e);
    expect(isBerthError(refused, 'environment_invalid')).toBe(true);
    expect(refused.message).toMatch(/berth-absent-image:none/);
    expect((await berth.api.getEnvironment(admin, env.id)).state).toBe('idle');
    expect(await countLabelled(LABEL.environmentId, env.id)).toEqual({ containers: 0, networks: 0, volumes: 0 });
  });

  it('should fail a profile naming an unregistered provider with provider_missing', async () => {
    const withDocker = await start();
    const env = await createDocker(withDocker);
    await stop(withDocker);

    const nativeOnly = await start({ docker: false });
    const created = await createDocker(nativeOnly).catch((e) => e);
    expect(isBerthError(created, 'provider_missing')).toBe(true);
    const acquired = await nativeOnly.api.acquire(admin, env.id).catch((e) => e);
    expect(isBerthError(acquired, 'provider_missing')).toBe(true);
    expect((await nativeOnly.api.getEnvironment(admin, env.id)).availability).toBe('unavailable');
    expect((await countLabelled(LABEL.environmentId, env.id)).containers).toBe(0);
  });

  it('should answer provider_unavailable while the engine is unreachable, create nothing, and allocate once it is back', async () => {
    const cut = await start({ docker: { extraLabels: run, endpoint: { socketPath: join(dir, 'no-engine.sock') } } });
    const env = await createDocker(cut);
    expect((await cut.api.getEnvironment(admin, env.id)).availability).toBe('unavailable');
    const refused = await cut.api.acquire(admin, env.id).catch((e) => e);
    expect(isBerthError(refused, 'provider_unavailable')).toBe(true);
    // Nothing was sent to the engine: the intent is confirmed absent at once, the environment idle again.
    expect(await allocationState(cut, String(refused.detail.allocationId))).toBe('failed');
    expect((await cut.api.getEnvironment(admin, env.id)).allocation).toBeNull();
    expect((await cut.api.activeAllocations(admin)).items).toEqual([]);
    await stop(cut);

    const back = await start();
    expect((await back.api.activeAllocations(admin)).items).toEqual([]);
    const a = await back.api.acquire(admin, env.id);
    expect(a.generation).toBe(2);
    expect((await countLabelled(LABEL.environmentId, env.id)).containers).toBe(1);
  });
});
