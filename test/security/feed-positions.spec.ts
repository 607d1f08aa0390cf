/**
 * Global positions a member sends to the event feeds (`?after=`, `Last-Event-ID`), through the real gateway over the
 * real runtime (SQLite): any 20-digit number was taken, and one past 2^63 - 1 reached the store, which refused to
 * bind it, so `GET /v1/events` answered 200 and then an `event: error` `internal` (logged as a server fault). A
 * position is now at most 2^63 - 1: anything larger is a typed 400 before the stream opens, on the audit feed and on
 * a lease's pause feed, and the largest one is still a position (an empty live feed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema } from '../../schemas/api.ts';
import { startGateway, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectStatus } from '../integration/workspace-http.ts';

let gw: RunningGateway;
const TOO_LARGE = ['9223372036854775808', '18446744073709551616', '99999999999999999999'];

beforeAll(async () => {
  gw = await startGateway();
  await expectStatus(call(gw, 'POST', '/v1/leases', { json: { key: 'pos-key', work: { kind: 'workflow', id: 'w-1' }, profile: { provider: 'native' } } }), 201);
});
afterAll(() => gw?.close());

async function expectRefused(path: string, headers: Record<string, string> = {}): Promise<void> {
  const answer = await call(gw, 'GET', path, { headers });
  expect([path, headers, answer.status]).toEqual([path, headers, 400]);
  expect(errorBodySchema.parse(answer.json).error.code).toBe('invalid_request');
}

describe('global positions on the feeds', () => {
  it.each(TOO_LARGE)('refuses %s as a position, in the query and in Last-Event-ID', async (position) => {
    await expectRefused(`/v1/events?after=${position}`);
    await expectRefused(`/v1/events?after=${position}&until=head`);
    await expectRefused('/v1/events', { 'last-event-id': position });
    await expectRefused(`/v1/leases/pos-key/events?after=${position}`);
    await expectRefused('/v1/leases/pos-key/events', { 'last-event-id': position });
  });

  it('still takes the largest position, and logs no server fault', async () => {
    for (const headers of [{}, { 'last-event-id': '9223372036854775807' }] as Record<string, string>[]) {
      const abort = new AbortController();
      const path = 'last-event-id' in headers ? '/v1/events' : '/v1/events?after=9223372036854775807';
      const response = await fetch(`${gw.url}${path}`, { headers: { ...gw.headers(), ...headers }, signal: abort.signal });
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      // Nothing comes after the largest position: no event, and no error, within a moment.
      const first = await Promise.race([reader.read().then(({ value }) => Buffer.from(value ?? []).toString()), new Promise((resolve) => setTimeout(() => resolve(''), 500))]);
      expect(first).not.toContain('event: error');
      abort.abort();
    }
    expect(gw.logs.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
