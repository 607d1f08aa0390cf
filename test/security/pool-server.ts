/**
 * A real `berth serve` with one warm pool of the security specs' Docker profile (pool-residue, pool-content): its
 * start, the wait until the pool is full, a tenant's acquire (a claim while one is ready) and the teardown that
 * removes every container the pool made.
 */
import { LABEL } from '../../src/providers/docker/labels.ts';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { removeTestResources } from '../integration/docker-env.ts';

export const POOL_PROFILE = { provider: 'docker', memoryMb: 256, pidsLimit: 64 };

export interface PoolServer {
  server: BerthServer;
  /** Resolves once the pool holds `size` ready containers. */
  ready(): Promise<unknown>;
  /** The pool's claims by result (GET /v1/pools, admin). */
  claims(): Promise<Record<string, number>>;
  /** The tenant's acquire of its environment. */
  acquire(token: string, environmentId: string): Promise<{ allocationId: string; identity: { resourceId: string } }>;
  close(): Promise<void>;
}

export async function startPoolServer(pool: string, size: number): Promise<PoolServer> {
  const server = await startServer([], { BERTH_POOLS: JSON.stringify([{ name: pool, profile: POOL_PROFILE, size }]) });
  const status = async () => (await server.json<{ pools: { ready: number; claims: Record<string, number> }[] }>('/v1/pools', { token: tokens.admin })).pools[0]!;
  const s: PoolServer = {
    server,
    ready: () => waitFor(status, { until: (p) => p.ready === size, timeoutMs: 60_000, what: `${size} pooled containers ready` }),
    claims: async () => (await status()).claims,
    acquire: (token, environmentId) => server.json(`/v1/environments/${environmentId}/allocations`, { method: 'POST', body: {}, token }),
    async close() {
      await server.close();
      await removeTestResources({ [LABEL.environmentId]: `hpool_${pool}` });
    },
  };
  await s.ready();
  return s;
}
