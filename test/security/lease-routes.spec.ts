/**
 * Lease routes against a hostile member token (DESIGN §13), through the real gateway over the real runtime (native):
 * another scope's member gets 404 on every route of a key bound in scope A and binding the same key gives it a lease
 * of its own; the lease's env (the caller's, maybe secret) is in no answer and no pause frame; malformed keys are 400;
 * a profile past the ceilings is refused like an environment's; and the scope's environments quota bounds how many
 * leases get a machine (a suspending acquire pauses instead).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultRolePolicy } from '../../src/runtime/role-policy.ts';
import { startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus } from '../integration/workspace-http.ts';

let gw: RunningGateway;
let tight: RunningGateway;

const ENVIRONMENTS_QUOTA = 2;
const LEASES_QUOTA = 4;
const SECRET = 'lease-secret-9f2c71d04be3a685';

beforeAll(async () => {
  gw = await startGateway();
  tight = await startGateway({ policy: { ...defaultRolePolicy, quotas: { ...defaultRolePolicy.quotas, environments: ENVIRONMENTS_QUOTA, leases: LEASES_QUOTA } } });
});
afterAll(async () => {
  await gw?.close();
  await tight?.close();
});

const bindBody = (key: string, extra: Record<string, unknown> = {}) => ({ key, work: { kind: 'workflow', id: `w-${key}` }, profile: { provider: 'native' }, ...extra });

describe('lease routes: another scope', () => {
  it("should answer 404 to bob on every route of alice's key, and give bob his own lease under the same key", async () => {
    const alices = await expectStatus(call(gw, 'POST', '/v1/leases', { json: bindBody('shared-key') }), 201);
    await expectStatus(call(gw, 'POST', '/v1/leases/shared-key/acquire', { json: {} }), 200);
    const bob = { token: tokens.bob };
    await expectError(call(gw, 'GET', '/v1/leases/shared-key', bob), 404, 'not_found');
    await expectError(call(gw, 'POST', '/v1/leases/shared-key/acquire', { ...bob, json: {} }), 404, 'not_found');
    await expectError(call(gw, 'POST', '/v1/leases/shared-key/pause', { ...bob, json: { cause: { kind: 'x' } } }), 404, 'not_found');
    for (const verb of ['hold', 'resume', 'release']) await expectError(call(gw, 'POST', `/v1/leases/shared-key/${verb}`, bob), 404, 'not_found');
    await expectError(call(gw, 'GET', '/v1/leases/shared-key/events', bob), 404, 'not_found');
    expect((await call(gw, 'GET', '/v1/leases', bob)).json).toEqual([]);
    expect((await call(gw, 'GET', '/v1/leases?workKind=workflow&workId=w-shared-key', bob)).json).toEqual([]);

    // The id is derived from the scope and the key: bob's bind of the same key (other work, even) is his own lease.
    const bobs = await expectStatus(call(gw, 'POST', '/v1/leases', { ...bob, json: bindBody('shared-key', { work: { kind: 'workflow', id: 'bob-work' } }) }), 201);
    expect(bobs.id).not.toBe(alices.id);
    expect(bobs).toMatchObject({ machine: null, work: { id: 'bob-work' } });
    const alicesNow = await expectStatus(call(gw, 'GET', '/v1/leases/shared-key'), 200);
    expect(alicesNow).toMatchObject({ id: alices.id, work: { id: 'w-shared-key' }, machine: { generation: 1 } });
    expect((await call(gw, 'GET', '/v1/streams/lease-' + alices.id, bob)).status).toBe(404);
  });
});

describe('lease routes: the env stays the caller\'s', () => {
  it('should never answer spawn.env: not in bind, get, list, acquire, pause, release or the pause feed', async () => {
    const answers: string[] = [];
    const keep = async (p: ReturnType<typeof call>) => answers.push((await p).text);
    await keep(call(gw, 'POST', '/v1/leases', { json: bindBody('secret-key', { spawn: { env: { API_TOKEN: SECRET } } }) }));
    await keep(call(gw, 'POST', '/v1/leases', { json: bindBody('secret-key', { spawn: { env: { API_TOKEN: SECRET } } }) }));
    await keep(call(gw, 'GET', '/v1/leases/secret-key'));
    await keep(call(gw, 'GET', '/v1/leases'));
    await keep(call(gw, 'POST', '/v1/leases/secret-key/acquire', { json: {} }));
    // It was recorded (the lease's commands get it, and its scope's replay shows the event): the answers leave it out.
    const { id } = JSON.parse(answers[2]) as { id: string };
    expect((await call(gw, 'GET', `/v1/streams/lease-${id}`)).text).toContain(SECRET);
    await keep(call(gw, 'POST', '/v1/leases/secret-key/pause', { json: { cause: { kind: 'waiting' } } }));
    await keep(call(gw, 'POST', '/v1/leases/secret-key/hold'));
    await keep(call(gw, 'POST', '/v1/leases/secret-key/release'));
    await keep(call(gw, 'GET', '/v1/leases/secret-key/events')); // ends after `released`
    expect(answers.every((a) => a.length > 0)).toBe(true);
    expect(answers.at(-1)).toContain('"state":"released"');
    for (const answer of answers) {
      expect(answer).not.toContain(SECRET);
      expect(answer).not.toContain('API_TOKEN');
    }
  });
});

describe('lease routes: malformed keys and profiles', () => {
  it('should refuse a key with a path, 300 characters, or none, with 400', async () => {
    for (const key of ['../x', 'a/b', 'x'.repeat(300), '', ' lead', '.hidden']) {
      await expectError(call(gw, 'POST', '/v1/leases', { json: bindBody(key) }), 400, 'invalid_request');
    }
    for (const key of ['..%2Fx', 'x'.repeat(300), '%20x']) {
      await expectError(call(gw, 'GET', `/v1/leases/${key}`), 400, 'invalid_request');
      await expectError(call(gw, 'POST', `/v1/leases/${key}/acquire`, { json: {} }), 400, 'invalid_request');
    }
    expect((await call(gw, 'POST', '/v1/leases//acquire', { json: {} })).status).toBeGreaterThanOrEqual(400);
    // Both a profile and an environment (an id, so no name is looked up first): refused for its shape.
    const someId = `henv_${'0'.repeat(32)}`;
    await expectError(call(gw, 'POST', '/v1/leases', { json: { ...bindBody('two-kinds'), environmentId: someId } }), 400, 'invalid_request');
    await expectError(call(gw, 'POST', '/v1/leases', { json: { ...bindBody('bad-env'), spawn: { env: { 'A=B': 'x' } } } }), 400, 'invalid_request');
  });

  it("should refuse a member's profile past the ceilings at bind, like an environment's creation", async () => {
    const big = await expectError(call(gw, 'POST', '/v1/leases', { json: bindBody('too-big', { profile: { provider: 'native', memoryMb: 1_048_576 } }) }), 429, 'quota_exceeded');
    expect(big.detail).toMatchObject({ quota: 'memoryMb' });
    await expectError(call(gw, 'POST', '/v1/leases', { json: bindBody('uncontained', { profile: { provider: 'native', contain: false } }) }), 403, 'forbidden');
    // Nothing was bound for either.
    await expectError(call(gw, 'GET', '/v1/leases/too-big'), 404, 'not_found');
    await expectError(call(gw, 'GET', '/v1/leases/uncontained'), 404, 'not_found');
  });
});

describe("lease routes: the scope's environments quota", () => {
  it('should give machines to as many leases as the quota allows, and pause a suspending acquire past it', async () => {
    const bob = { token: tokens.bob };
    for (const key of ['q-1', 'q-2', 'q-3']) await expectStatus(call(tight, 'POST', '/v1/leases', { ...bob, json: bindBody(key) }), 201);
    await expectStatus(call(tight, 'POST', '/v1/leases/q-1/acquire', { ...bob, json: {} }), 200);
    await expectStatus(call(tight, 'POST', '/v1/leases/q-2/acquire', { ...bob, json: {} }), 200);
    const over = await expectError(call(tight, 'POST', '/v1/leases/q-3/acquire', { ...bob, json: {} }), 429, 'quota_exceeded');
    expect(over.detail).toMatchObject({ quota: 'environments', limit: ENVIRONMENTS_QUOTA, used: ENVIRONMENTS_QUOTA });
    expect(await expectStatus(call(tight, 'GET', '/v1/leases/q-3', bob), 200)).toMatchObject({ state: 'running', machine: null });

    const suspended = await expectError(call(tight, 'POST', '/v1/leases/q-3/acquire', { ...bob, json: { suspend: true } }), 409, 'invalid_state');
    expect(suspended.detail).toMatchObject({ reason: 'paused', cause: 'quota_exceeded', lease: { key: 'q-3', state: 'paused', pause: { cause: { kind: 'spawn_refused' }, attempt: 1 } } });
    const paused = await expectStatus(call(tight, 'GET', '/v1/leases/q-3', bob), 200);
    expect(paused).toMatchObject({ state: 'paused', machine: null, pause: { retryAt: expect.any(Number) } });
    expect(paused.pause.retryAt).toBeGreaterThan(Date.now());

    // A place frees up: the paused lease resumes at its next acquire.
    await expectStatus(call(tight, 'POST', '/v1/leases/q-1/release', bob), 200);
    expect(await expectStatus(call(tight, 'POST', '/v1/leases/q-3/acquire', { ...bob, json: {} }), 200)).toMatchObject({ reused: false, lease: { state: 'running', pause: null } });
  }, 60_000);

  it('should bound the leases a member binds (each is a stream and an actor): past the quota, quota_exceeded', async () => {
    const alice = { token: tokens.alice };
    for (let i = 1; i <= LEASES_QUOTA; i++) await expectStatus(call(tight, 'POST', '/v1/leases', { ...alice, json: bindBody(`many-${i}`) }), 201);
    const over = await expectError(call(tight, 'POST', '/v1/leases', { ...alice, json: bindBody('one-more') }), 429, 'quota_exceeded');
    expect(over.detail).toMatchObject({ quota: 'leases', limit: LEASES_QUOTA });
    // Binding one of them again is answered, not counted.
    await expectStatus(call(tight, 'POST', '/v1/leases', { ...alice, json: bindBody('many-1') }), 200);
  });
});
