/**
 * A claimed container carries nothing from a previous tenant (issue 20): a pooled container serves one environment
 * for life, so what a tenant leaves behind (files in /tmp, HOME and the workspace view) goes with its container at
 * release, and the next tenant's claim is another container whose only trace of the pool
 * is none at all (the readiness probe's spool is gone).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, execIn, rawDocker, removeTestResources } from '../integration/docker-env.ts';

const POOL = 'sec-residue';
const PROFILE = { provider: 'docker', memoryMb: 256, pidsLimit: 64 };
let server: BerthServer;

beforeAll(async () => {
  if (!dockerAvailable) return;
  server = await startServer([], { BERTH_POOLS: JSON.stringify([{ name: POOL, profile: PROFILE, size: 1 }]) });
  await ready();
}, 90_000);
afterAll(async () => {
  if (!dockerAvailable) return;
  await server.close();
  await removeTestResources({ [LABEL.environmentId]: `hpool_${POOL}` });
});

const ready = () =>
  waitFor(async () => (await server.json<{ pools: { ready: number }[] }>('/v1/pools', { token: tokens.admin })).pools[0], {
    until: (p) => p.ready === 1,
    timeoutMs: 60_000,
    what: 'a pooled container ready',
  });

const claim = (token: string, environmentId: string) =>
  server.json<{ allocationId: string; identity: { resourceId: string } }>(`/v1/environments/${environmentId}/allocations`, { method: 'POST', body: {}, token });

describe.skipIf(!dockerAvailable)('a claimed container and the tenant before', () => {
  it('should hand the next tenant another container, with nothing of the last one and no probe left in its spool', async () => {
    const aliceEnv = await createEnvironment(server, tokens.alice, PROFILE);
    const alice = await claim(tokens.alice, aliceEnv);
    const planted = await submit(server, aliceEnv, 'echo secret > /tmp/alice; echo secret > $HOME/alice; echo secret > /workspace/alice; echo planted', {}, tokens.alice);
    expect((await finished(server, planted.id, tokens.alice)).exitCode).toBe(0);
    // The finished command gives its use back in moments; until then the release is refused (busy).
    const release = () => server.call(`/v1/environments/${aliceEnv}/allocations/${alice.allocationId}`, { method: 'DELETE', token: tokens.alice });
    const released = await waitFor(async () => (await release()).json(), { until: (r) => r.state === 'released', timeoutMs: 20_000, what: 'the release' });
    expect(released.state).toBe('released');
    await expect(rawDocker.getContainer(alice.identity.resourceId).inspect()).rejects.toThrow();

    await ready();
    const bobEnv = await createEnvironment(server, tokens.bob, PROFILE);
    const bob = await claim(tokens.bob, bobEnv);
    expect(bob.identity.resourceId).not.toBe(alice.identity.resourceId);
    const look = await execIn(bob.identity.resourceId, ['/bin/sh', '-c', 'ls -A /tmp $HOME /workspace /berth/spool/ops']);
    expect(look.exitCode).toBe(0);
    expect(look.output).not.toContain('alice');
    expect(look.output).not.toMatch(/pool-probe/);
  }, 120_000);
});
