/**
 * A claimed container carries nothing from a previous tenant (issue 20): a pooled container serves one environment
 * for life, so what a tenant leaves behind (files in /tmp, HOME and the workspace view) goes with its container at
 * release, and the next tenant's claim is another container whose only trace of the pool
 * is none at all (the readiness probe's spool is gone).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, finished, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { dockerAvailable, execIn, rawDocker } from '../integration/docker-env.ts';
import { POOL_PROFILE as PROFILE, startPoolServer, type PoolServer } from './pool-server.ts';

let pool: PoolServer;
let server: BerthServer;

beforeAll(async () => {
  if (!dockerAvailable) return;
  pool = await startPoolServer('sec-residue', 1);
  server = pool.server;
}, 90_000);
afterAll(() => pool?.close());

const ready = () => pool.ready();
const claim = (token: string, environmentId: string) => pool.acquire(token, environmentId);

describe.skipIf(!dockerAvailable)('a claimed container and the tenant before', () => {
  it('should hand the next tenant another container, with nothing of the last one and no probe left in its spool', async () => {
    const aliceEnv = await createEnvironment(server, tokens.alice, PROFILE);
    const alice = await claim(tokens.alice, aliceEnv);
    const planted = await submit(server, aliceEnv, 'echo secret > /tmp/alice; echo secret > $HOME/alice; echo secret > /workspace/alice; echo planted', {}, tokens.alice);
    expect((await finished(server, planted.id, tokens.alice)).exitCode).toBe(0);
    const release = await server.call(`/v1/environments/${aliceEnv}/allocations/${alice.allocationId}`, { method: 'DELETE', token: tokens.alice });
    expect((await release.json()).state).toBe('released');
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
