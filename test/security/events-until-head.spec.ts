/**
 * `GET /v1/events?until=head` (what `berth events` reads without --follow) against member tokens: the listing ends by
 * itself even when the scope has no event (it holds no stream slot open), carries only the caller's scope, stops at
 * the head of the request (an event appended later is not in it), and a malformed `until` is refused.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';

let gw: RunningGateway;
beforeAll(async () => {
  gw = await startGateway();
});
afterAll(() => gw?.close());

/** The whole answer of a listing (it must end: a live feed would hang here until the test's timeout). */
const listing = async (token: string, query = 'until=head') => {
  const response = await fetch(`${gw.url}/v1/events?${query}`, { headers: gw.headers(token) });
  return { status: response.status, text: await response.text() };
};

describe('the audit feed up to its head', () => {
  it('ends at once for a scope with no event, and carries only the caller\'s scope', async () => {
    expect(await listing(tokens.bob)).toEqual({ status: 200, text: '' });
    const aliceEnv = await createEnvironment(gw, tokens.alice);
    const bobEnv = await createEnvironment(gw, tokens.bob);
    const bob = await listing(tokens.bob);
    expect(bob.status).toBe(200);
    expect(bob.text).toContain(bobEnv);
    expect(bob.text).not.toContain(aliceEnv);
  });

  it('stops at the head of the request, and resumes after a position', async () => {
    const before = await listing(tokens.alice);
    const ids = [...before.text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
    expect(ids.length).toBeGreaterThan(0);
    const later = await createEnvironment(gw, tokens.alice);
    expect(before.text).not.toContain(later);
    const after = await listing(tokens.alice, `until=head&after=${ids.at(-1)}`);
    expect(after.text).toContain(later);
    expect([...after.text.matchAll(/^id: (\d+)$/gm)].every((m) => Number(m[1]) > ids.at(-1)!)).toBe(true);
  });

  it('refuses an until other than head', async () => {
    const refused = await fetch(`${gw.url}/v1/events?until=forever`, { headers: gw.headers(tokens.bob) });
    expect(refused.status).toBe(400);
    expect((await refused.json()).error.code).toBe('invalid_request');
  });
});
