/**
 * Pagination as a hostile tenant uses it (DESIGN §13), against a real `berth serve`: every list route refuses a limit
 * outside 1..1000 and a cursor it did not make with a typed 400 in the wire's error shape (never echoing a huge
 * cursor back), and a cursor never widens what a caller sees: another tenant's cursor, or a forged one, pages
 * through the caller's own scope only.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema, NEXT_CURSOR_HEADER } from '../../schemas/api.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';

let server: BerthServer;
const mine: string[] = [];
const theirs: string[] = [];
let aliceEnvironment: string;

beforeAll(async () => {
  server = await startServer();
  for (let i = 0; i < 4; i++) mine.push(await createEnvironment(server, tokens.alice));
  for (let i = 0; i < 3; i++) theirs.push(await createEnvironment(server, tokens.bob));
  aliceEnvironment = mine[0];
  for (let i = 0; i < 3; i++) await finished(server, (await submit(server, aliceEnvironment, ['true'])).id);
}, 120_000);

afterAll(async () => {
  await server?.close();
});

const listRoutes = () => [
  '/v1/environments',
  '/v1/catalog',
  '/v1/executions',
  '/v1/activity',
  '/v1/allocations',
  '/v1/harnesses',
  `/v1/environments/${aliceEnvironment}/allocations`,
  `/v1/environments/${aliceEnvironment}/harnesses`,
];

async function refused(path: string): Promise<{ status: number; code: string; text: string }> {
  const response = await server.call(path);
  const text = await response.text();
  const body = errorBodySchema.parse(JSON.parse(text));
  return { status: response.status, code: body.error.code, text };
}

/** Walks a list page by page with `token`; returns every id seen, in order. */
async function walk(path: string, token: string, limit: number, cursor?: string, order: 'asc' | 'desc' = 'asc'): Promise<string[]> {
  const ids: string[] = [];
  for (let next = cursor, first = true; first || next; first = false) {
    const response = await server.call(`${path}?limit=${limit}&order=${order}${next ? `&cursor=${next}` : ''}`, { token });
    expect(response.status).toBe(200);
    ids.push(...((await response.json()) as { id: string }[]).map((x) => x.id));
    next = response.headers.get(NEXT_CURSOR_HEADER) ?? undefined;
  }
  return ids;
}

describe('pagination: bad page queries are typed 400s', () => {
  it.each(['0', '-1', '1001', '1000000', '99999999999999999999', '1.5', 'ten', ''])('should refuse limit=%s on every list route', async (limit) => {
    for (const path of listRoutes()) {
      expect(await refused(`${path}?limit=${limit}`), path).toMatchObject({ status: 400, code: 'invalid_request' });
    }
  });

  it('should refuse a cursor it did not make, and a huge one, without echoing it back', async () => {
    const forged = Buffer.from('c2.1').toString('base64url');
    const huge = 'Q'.repeat(100_000);
    for (const path of listRoutes()) {
      for (const cursor of ['garbage!', '12', forged, Buffer.from('c1.-1').toString('base64url'), 'A'.repeat(129)]) {
        expect(await refused(`${path}?cursor=${encodeURIComponent(cursor)}`), `${path} ${cursor}`).toMatchObject({ status: 400, code: 'invalid_request' });
      }
      const answer = await refused(`${path}?cursor=${huge}`);
      expect(answer).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(answer.text.length).toBeLessThan(2000);
    }
  });

  it('should refuse an order other than asc or desc', async () => {
    expect(await refused('/v1/executions?order=sideways')).toMatchObject({ status: 400, code: 'invalid_request' });
  });
});

describe('pagination: a cursor never widens what a caller sees', () => {
  it("should show bob only bob's environments when he pages on with alice's cursor", async () => {
    const first = await server.call('/v1/environments?limit=1', { token: tokens.alice });
    const cursor = first.headers.get(NEXT_CURSOR_HEADER);
    expect(cursor).toBeTruthy();
    const seen = await walk('/v1/environments', tokens.bob, 2, cursor!);
    expect(seen.length).toBeGreaterThan(0);
    for (const id of seen) expect(theirs).toContain(id);
  });

  it("should page alice's executions and activity for bob as nothing at all, from any cursor", async () => {
    const first = await server.call('/v1/executions?limit=1', { token: tokens.alice });
    const cursor = first.headers.get(NEXT_CURSOR_HEADER)!;
    expect(cursor).toBeTruthy();
    for (const path of ['/v1/executions', '/v1/activity']) {
      expect(await walk(path, tokens.bob, 1, cursor)).toEqual([]);
      expect(await walk(path, tokens.bob, 1000)).toEqual([]);
    }
    expect(await walk('/v1/executions', tokens.alice, 1)).toHaveLength(3);
  });

  it("should answer alice's environment's allocations as not found to bob, cursor or not", async () => {
    const response = await server.call(`/v1/environments/${aliceEnvironment}/allocations?limit=1000`, { token: tokens.bob });
    expect(response.status).toBe(404);
  });

  it('should walk every page of a scope once, whatever the page size, and the largest page holds everything here', async () => {
    for (const limit of [1, 2, 3, 1000]) expect(await walk('/v1/environments', tokens.alice, limit)).toEqual(mine);
    for (const limit of [1, 3]) expect(await walk('/v1/environments', tokens.alice, limit, undefined, 'desc')).toEqual([...mine].reverse());
  });
});
