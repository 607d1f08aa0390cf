/**
 * The kill -9 matrix of warm pools (issue 20): a real `berth serve` on a real Docker engine with a pool of two,
 * SIGKILLed by its own crash points during the refill after a claim (container created and not started; started,
 * its report not durable), during a refill before any claim (the restart found a pooled container gone) and during a
 * claim (the environment's pooled request durable, the claim not; the claim durable, the environment not told; the
 * claim durable, its content version not yet shown); restarted on the same data directory. Every row: the environment ends holding one container, no container is held by two environments or
 * by an environment and the pool, every container the pool's label names is accounted for (no leak), and the pool
 * refills to its size; with a content version, the first command sees exactly that version.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { createEnvironment, restartAfterCrash, startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { build, putFile, run } from '../e2e/content-client.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { hasExited } from '../integration/cli-process.ts';
import { dockerAvailable, rawDocker, removeTestResources } from '../integration/docker-env.ts';

const PROFILE = { provider: 'docker', memoryMb: 256, pidsLimit: 64 };
const SIZE = 2;

interface Scene {
  server: BerthServer;
  pool: string;
  env: Record<string, string>;
}

const scenes: Scene[] = [];
afterEach(async () => {
  for (const { server, pool } of scenes.splice(0)) {
    await server.close();
    await removeTestResources({ [LABEL.environmentId]: `hpool_${pool}` });
  }
});

const poolStatus = async (s: Scene) => (await s.server.json<{ pools: { ready: number; starting: number; retiring: number }[] }>('/v1/pools', { token: tokens.admin })).pools[0];

type Status = Awaited<ReturnType<typeof poolStatus>>;
const full = (p: Status) => p.ready === SIZE && p.starting === 0 && p.retiring === 0;

/** The pool holds `SIZE` ready allocations and makes or releases none. */
const refilled = (s: Scene) => waitFor(() => poolStatus(s), { until: full, timeoutMs: 60_000, what: 'the pool refilled to its size' });

/**
 * As `refilled`, for a server started with a crash point armed: 'died' once it is gone instead (a refill reached the
 * point first), else 'full'.
 */
const refilledOrDied = async (s: Scene) => {
  const { child } = s.server.process;
  const seen = await waitFor(async () => (hasExited(child) ? 'died' : poolStatus(s)), {
    until: (p) => p === 'died' || full(p),
    timeoutMs: 60_000,
    what: 'the pool refilled to its size, or the server gone',
  });
  return seen === 'died' ? 'died' : 'full';
};

const acquire = (s: Scene, environmentId: string) =>
  s.server.json<{ allocationId: string; identity: { resourceId: string } }>(`/v1/environments/${environmentId}/allocations`, { method: 'POST', body: {} });

/** A server whose pool is full; the crash point comes with its restart. */
async function scene(): Promise<Scene> {
  const pool = `k9-${randomUUID().slice(0, 8)}`;
  const env = { BERTH_POOLS: JSON.stringify([{ name: pool, profile: PROFILE, size: SIZE }]) };
  const server = await startServer([], env);
  const s = { server, pool, env };
  scenes.push(s);
  await refilled(s);
  return s;
}

/**
 * Every container carrying the pool's label runs and is either one of `held` or one the pool has ready; the first
 * of `held` came from the pool (the acquire that crashed was a claim).
 */
async function expectNoLeak(s: Scene, held: string[]): Promise<void> {
  await refilled(s);
  const containers = await rawDocker.listContainers({ all: true, filters: { label: [`${LABEL.environmentId}=hpool_${s.pool}`] } });
  expect(containers.every((c) => c.State === 'running')).toBe(true);
  const pooledHeld = held.filter((id) => containers.some((c) => c.Id === id));
  expect(pooledHeld).toContain(held[0]);
  expect(containers).toHaveLength(SIZE + pooledHeld.length);
}

/** `cd /env && find . | sort`, each file with its bytes. */
const LIST_ENV = 'cd /env && find . | sort | while read -r p; do if [ -f "$p" ]; then echo "$p $(cat "$p")"; else echo "$p"; fi; done';

/** `withContent`: the environment has a content version; `memberLost`: a pooled container is removed while it is down. */
async function crashAndRecover(crash: Record<string, string>, crashAt: string, { withContent = false, memberLost = false } = {}): Promise<void> {
  const s = await scene();
  const first = await createEnvironment(s.server, tokens.alice, PROFILE);
  if (withContent) {
    await putFile(s.server, first, 'marker.txt', 'one');
    expect(await build(s.server, first)).toMatchObject({ version: 1, status: 'ready', active: true });
  }
  if (memberLost) {
    const [member] = await rawDocker.listContainers({ filters: { label: [`${LABEL.environmentId}=hpool_${s.pool}`] } });
    await s.server.stop('SIGTERM');
    await rawDocker.getContainer(member!.Id).remove({ force: true });
  }
  await s.server.restart('SIGTERM', { ...s.env, ...crash });
  // Its members probed again, the acquire is a claim. On a busy host a member may be made again first (its probe
  // timed out, or the restart found it lost): that refill reaches a refill row's crash point before anything is
  // asked, which is the row's crash; the claim then comes after the recovery, once the pool is full again.
  const diedEarly = (await refilledOrDied(s)) === 'died';
  // The claim, or the refill that follows it, kills the server: the answer may never come.
  if (!diedEarly) await acquire(s, first).catch(() => undefined);
  await restartAfterCrash(s.server, crashAt, s.env);
  if (diedEarly) await refilled(s);

  const claimed = await acquire(s, first);
  const others = await Promise.all([1, 2].map(async () => acquire(s, await createEnvironment(s.server, tokens.alice, PROFILE))));
  const held = [claimed, ...others].map((a) => a.identity.resourceId);
  expect(new Set(held).size).toBe(held.length);
  // Acquired again, the first environment keeps the one allocation it held.
  expect((await acquire(s, first)).allocationId).toBe(claimed.allocationId);
  if (withContent) {
    // The version the claim recorded, whole: recovery showed it before the environment heard `allocated`.
    const { slug } = await s.server.json<{ slug: string }>(`/v1/environments/${first}`);
    const seen = await run(s.server, first, LIST_ENV);
    expect(seen.record).toMatchObject({ status: 'exited', exitCode: 0, version: 1, target: { allocationId: claimed.allocationId } });
    expect(seen.stdout.trim().split('\n')).toEqual(['.', `./${slug}`, `./${slug}/marker.txt one`]);
  }
  await expectNoLeak(s, held);
}

describe.skipIf(!dockerAvailable)('warm pools killed with -9', () => {
  it('should recover a refill killed with its container created and not started', () =>
    crashAndRecover({ BERTH_CRASH_AT: 'docker.container-created' }, 'docker.container-created'), 180_000);

  it('should recover a refill killed with its container running and the report not durable', () =>
    crashAndRecover({ BERTH_CRASH_AT: 'allocation.provider-answered' }, 'allocation.provider-answered'), 180_000);

  it('should recover a claim killed after the environment asked for the pooled allocation', () =>
    crashAndRecover({ BERTH_CRASH_AFTER: 'environment.acquisition_requested' }, 'environment.acquisition_requested'), 180_000);

  it('should recover a claim killed after the allocation was claimed, the environment not told', () =>
    crashAndRecover({ BERTH_CRASH_AFTER: 'allocation.claimed' }, 'allocation.claimed'), 180_000);

  it('should recover a claim killed after the allocation was claimed with a content version, the version not yet shown', () =>
    crashAndRecover({ BERTH_CRASH_AFTER: 'allocation.claimed' }, 'allocation.claimed', { withContent: true }), 240_000);

  it('should recover a refill killed before any claim, made because the restart found a pooled container gone', () =>
    crashAndRecover({ BERTH_CRASH_AT: 'allocation.provider-answered' }, 'allocation.provider-answered', { memberLost: true }), 180_000);
});
