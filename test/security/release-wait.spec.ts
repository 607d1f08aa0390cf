/**
 * A release (or delete) waits out the use of a command already reported finished, since that command gives it back
 * once its output is saved. Attacked with a member token over HTTP through the real gateway (DESIGN §13): the wait
 * cannot be stretched. A running command's use is refused at once (no wait held open for as long as a command runs),
 * a finished one's use that is never given back holds the release for the bound only, the server answers others
 * meanwhile, and another tenant's allocation is not found.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FINISHING_USES_WAIT_MS } from '../../src/runtime/environments/environment-service.ts';
import { createEnvironment, startGateway, submit, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus, letSandboxReach } from '../integration/workspace-http.ts';
import { waitFor } from '../fixtures/wait-for.ts';

const BOUND_MS = FINISHING_USES_WAIT_MS;
let gw: RunningGateway;

beforeAll(async () => {
  gw = await startGateway();
  letSandboxReach(gw);
});
afterAll(() => gw?.close());

const allocationOf = async (environment: string) => (await expectStatus(call(gw, 'GET', `/v1/environments/${environment}/allocations`), 200))[0];
const release = (environment: string, allocationId: string, token = tokens.alice) =>
  call(gw, 'DELETE', `/v1/environments/${environment}/allocations/${allocationId}`, { token });

describe('a release waiting for a finished command against a hostile member', () => {
  it('is refused at once while a command runs, and another tenant cannot reach the allocation', async () => {
    const environment = await createEnvironment(gw);
    const running = await submit(gw, environment, ['sleep', '30']);
    const { allocationId } = await allocationOf(environment);
    const start = Date.now();
    await expectError(release(environment, allocationId), 409, 'environment_busy');
    expect(Date.now() - start).toBeLessThan(2_000);
    await expectError(release(environment, allocationId, tokens.bob), 404, 'environment_not_found');
    await expectStatus(call(gw, 'POST', `/v1/executions/${running.id}/cancel`, { json: {} }), 200);
  });

  it('holds for the bound only on a finished command whose use is never given back, and the server answers meanwhile', async () => {
    const environment = await createEnvironment(gw);
    const done = await submit(gw, environment, ['true']);
    expect((await expectStatus(call(gw, 'GET', `/v1/executions/${done.id}?waitMs=20000`), 200)).status).toBe('exited');
    // Its own use given back first, so the one taken below is the only one and nothing gives it back.
    const step = async () => (await expectStatus(call(gw, 'GET', `/v1/executions/${done.id}`), 200)).step;
    await waitFor(step, { what: 'the execution\'s use given back', until: (s) => s === 'released', timeoutMs: 10_000 });
    const { allocationId } = await allocationOf(environment);
    // A fault no route can cause: the finished command's use taken again under its id, as if its give-back were lost
    // (maintenance would return it later). Taken through the runtime, as the execution itself does.
    const alice = { scope: 'alice', role: 'member' } as const;
    await gw.berth.api.environments.acquireUse(alice, environment, allocationId, 'execution', done.id);

    const start = Date.now();
    const held = release(environment, allocationId);
    const health = await call(gw, 'GET', '/healthz');
    expect(health.status).toBe(200);
    expect(Date.now() - start).toBeLessThan(1_000);
    await expectError(held, 409, 'environment_busy');
    const waited = Date.now() - start;
    expect(waited).toBeGreaterThanOrEqual(BOUND_MS - 100);
    expect(waited).toBeLessThan(BOUND_MS + 3_000);
  }, 30_000);
});
