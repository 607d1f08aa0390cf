/**
 * The query of a lease's pause feed (`GET /v1/leases/{key}/events`) from a member, through the real gateway over the
 * real runtime: the route took the audit feed's query, whose `after` may be `now`, and turned it into a BigInt, so
 * `?after=now` answered a 500 `internal` (a SyntaxError logged as a server fault) for any key, bound or not; `until`
 * was taken and ignored. Now the feed takes what it serves (a global position to resume after): anything else is a
 * typed 400 in the wire's error shape, and a position still resumes it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema } from '../../schemas/api.ts';
import { startGateway, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectStatus } from '../integration/workspace-http.ts';

let gw: RunningGateway;

beforeAll(async () => {
  gw = await startGateway();
  await expectStatus(call(gw, 'POST', '/v1/leases', { json: { key: 'feed-key', work: { kind: 'workflow', id: 'w-1' }, profile: { provider: 'native' } } }), 201);
});
afterAll(() => gw?.close());

describe('the lease pause feed query', () => {
  it.each(['after=now', 'after=now&until=head', 'until=head', 'after=-1', 'after=x', 'after=1&after=2'])(
    'refuses ?%s with a typed 400, for a bound key and an unknown one',
    async (query) => {
      for (const key of ['feed-key', 'no-such-key']) {
        const answer = await call(gw, 'GET', `/v1/leases/${key}/events?${query}`);
        expect([query, key, answer.status]).toEqual([query, key, 400]);
        expect(errorBodySchema.parse(answer.json).error.code).toBe('invalid_request');
      }
    },
  );

  it('still resumes after a global position, and logs no server fault', async () => {
    for (const headers of [{}, { 'last-event-id': '0' }] as Record<string, string>[]) {
      const abort = new AbortController();
      const response = await fetch(`${gw.url}/v1/leases/feed-key/events?after=0`, { headers: { ...gw.headers(), ...headers }, signal: abort.signal });
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
      abort.abort();
    }
    expect(gw.logs.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
