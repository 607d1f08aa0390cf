/**
 * Warm pools against a hostile member (issue 20, DESIGN §13): pools are the admin's (a member can neither read,
 * drain nor configure one: `forbidden`, and no route takes a pool's settings), a claim gives a member no more than
 * its own profile (the pooled container takes the member's limits, not the pool's larger ones), a member's claims
 * count against its scope's environments quota, and pooled containers together are bounded at start.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { createEnvironment, startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, rawDocker, removeTestResources } from '../integration/docker-env.ts';
import { LABEL } from '../../src/providers/docker/labels.ts';

const POOL = 'sec-routes';
/** Larger than a member's default ceiling of 2048 MiB: a member must never get it through a claim. */
const POOL_PROFILE = { provider: 'docker', memoryMb: 3072, pidsLimit: 400 };

let server: BerthServer;

beforeAll(async () => {
  if (!dockerAvailable) return;
  server = await startServer([], { BERTH_POOLS: JSON.stringify([{ name: POOL, profile: POOL_PROFILE, size: 2 }]), BERTH_QUOTA_ENVIRONMENTS: '2' });
  await waitFor(() => pools(tokens.admin), { until: (p) => p[0]?.ready === 2, timeoutMs: 60_000, what: 'the pool filled' });
}, 90_000);
afterAll(async () => {
  if (!dockerAvailable) return;
  await server.close();
  await removeTestResources({ [LABEL.environmentId]: `hpool_${POOL}` });
});

async function pools(token: string): Promise<{ name: string; ready: number; claims: { hit: number } }[]> {
  return (await server.json<{ pools: { name: string; ready: number; claims: { hit: number } }[] }>('/v1/pools', { token })).pools;
}

async function expectError(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  const body = await response.json();
  expect(body).toEqual({ error: { code, message: expect.any(String), detail: expect.any(Object) } });
}

describe.skipIf(!dockerAvailable)('warm pools and a member token', () => {
  it('should refuse a member reading or draining a pool, and offer no route that configures one', async () => {
    await expectError(await server.call('/v1/pools', { token: tokens.alice }), 403, 'forbidden');
    await expectError(await server.call(`/v1/pools/${POOL}/drain`, { method: 'POST', body: {}, token: tokens.alice }), 403, 'forbidden');
    // Not even a pool's existence leaks: an unknown name is refused the same way.
    await expectError(await server.call('/v1/pools/no-such-pool/drain', { method: 'POST', body: {}, token: tokens.alice }), 403, 'forbidden');
    for (const [method, path] of [['POST', '/v1/pools'], ['PUT', `/v1/pools/${POOL}`], ['PATCH', `/v1/pools/${POOL}`], ['DELETE', `/v1/pools/${POOL}`]] as const) {
      const response = await server.call(path, { method, body: { size: 1000, profile: { provider: 'docker', memoryMb: 1_048_576 } }, token: tokens.alice });
      expect(response.status, `${method} ${path}`).toBe(404);
    }
    const [pool] = await pools(tokens.admin);
    expect(pool).toMatchObject({ name: POOL, ready: 2 });
  });

  it('should give a member its own limits on a claimed container, and count its claims against its environments quota', async () => {
    const first = await createEnvironment(server, tokens.alice, { provider: 'docker', memoryMb: 256, pidsLimit: 64 });
    const second = await createEnvironment(server, tokens.alice, { provider: 'docker', memoryMb: 256, pidsLimit: 64 });
    const claimed = [];
    for (const id of [first, second]) {
      claimed.push(await server.json<{ identity: { resourceId: string } }>(`/v1/environments/${id}/allocations`, { method: 'POST', body: {}, token: tokens.alice }));
    }
    expect((await pools(tokens.admin))[0].claims.hit).toBe(2);
    for (const a of claimed) {
      const info = await rawDocker.getContainer(a.identity.resourceId).inspect();
      expect(info.Config.Labels?.[LABEL.environmentId]).toBe(`hpool_${POOL}`);
      expect(info.HostConfig.Memory).toBe(256 * 1024 * 1024);
      expect(info.HostConfig.MemorySwap).toBe(256 * 1024 * 1024);
      expect(info.HostConfig.PidsLimit).toBe(64);
    }
    const third = await server.call('/v1/environments', { body: { name: 'one too many', profile: { provider: 'docker' } }, token: tokens.alice });
    await expectError(third, 429, 'quota_exceeded');
  });
});

describe('the pools an admin configures', () => {
  it('should refuse to start when the pools together keep more containers than BERTH_POOLS_MAX_CONTAINERS', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'berth-pool-bound-'));
    try {
      const pools = [{ name: 'a', profile: { provider: 'docker' }, size: 3 }, { name: 'b', profile: { provider: 'docker' }, size: 3 }];
      const run = await berth(['serve', '--data-dir', join(dir, 'data'), '--port', '0'], cleanEnv({ BERTH_POOLS: JSON.stringify(pools), BERTH_POOLS_MAX_CONTAINERS: '5', BERTH_TOKEN: tokens.admin }));
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(/the pools keep 6 containers together, past BERTH_POOLS_MAX_CONTAINERS \(5\)/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
