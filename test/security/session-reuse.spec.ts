/**
 * Sessions created from a profile, attacked with a member token over HTTP through the real gateway (DESIGN §13): a
 * shared-by-scope environment is never another tenant's, a profile a member could not ask for directly is refused
 * the same way here, session reuse cannot mint environments past the scope's quota, and the body cannot name both
 * an environment and a profile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus } from '../integration/workspace-http.ts';
import { defaultRolePolicy } from '../../src/runtime/role-policy.ts';

const QUOTA = 4;
let gw: RunningGateway;

beforeAll(async () => {
  gw = await startGateway({ policy: { ...defaultRolePolicy, quotas: { ...defaultRolePolicy.quotas, environments: QUOTA } } });
});
afterAll(() => gw?.close());

const session = (token: string, json: Record<string, unknown>) => call(gw, 'POST', '/v1/sessions', { token, json });

describe('sessions from a profile against a hostile member', () => {
  it("scope reuse never selects another tenant's environment, however the profile is written", async () => {
    const mine = await expectStatus(session(tokens.alice, { profile: { provider: 'native', contain: true } }), 201);
    const theirs = await expectStatus(session(tokens.bob, { profile: { contain: true, provider: 'native' } }), 201);
    expect(theirs.environmentId).not.toBe(mine.environmentId);
    await expectError(call(gw, 'GET', `/v1/environments/${mine.environmentId}`, { token: tokens.bob }), 404, 'environment_not_found');
  });

  it('a profile a member may not ask for is refused here too, and nothing is made', async () => {
    const before = (await expectStatus(call(gw, 'GET', '/v1/environments', { token: tokens.alice }), 200)).length;
    await expectError(session(tokens.alice, { profile: { provider: 'native', contain: false } }), 403, 'forbidden');
    await expectError(session(tokens.alice, { profile: { provider: 'native', contain: true, memoryMb: 1_000_000 } }), 429, 'quota_exceeded');
    expect((await expectStatus(call(gw, 'GET', '/v1/environments', { token: tokens.alice }), 200)).length).toBe(before);
  });

  it("session reuse mints environments only up to the scope's quota", async () => {
    const profile = { provider: 'native', contain: true, reuse: 'session' };
    const made: string[] = [];
    for (let i = 0; i < QUOTA + 3; i++) {
      const answer = await session(tokens.alice, { profile });
      if (answer.status !== 201) {
        expect(answer.json.error.code).toBe('quota_exceeded');
        break;
      }
      made.push(answer.json.environmentId);
    }
    expect(made.length).toBeLessThan(QUOTA);
    expect((await expectStatus(call(gw, 'GET', '/v1/environments', { token: tokens.alice }), 200)).length).toBe(QUOTA);
  });

  it('a body naming both an environment and a profile is refused', async () => {
    const env = await createEnvironment(gw, tokens.bob);
    await expectError(session(tokens.bob, { environmentId: env, profile: { provider: 'native' } }), 400, 'invalid_request');
  });
});
