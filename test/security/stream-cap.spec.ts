/**
 * Streams per token (issue 10, finding 6): nothing capped how many WebSocket and SSE streams one token holds. Against
 * a real `berth serve` with a cap of 3: the fourth stream of a token, over any of the streaming routes, is
 * `too_many_streams` (429) before anything upgrades or streams, while another token still gets one; a slot comes back
 * when its stream ends, however it ends (client close, completion), and a refused request holds none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { rawConnect } from '../fixtures/raw-ws-client.ts';
import { openStalled, type StalledClient } from './stalled-client.ts';

const CAP = 3;
let server: BerthServer;
let env: string;
let sleeper: string;
const auth = (token = tokens.alice) => ({ authorization: `Bearer ${token}` });

beforeAll(async () => {
  server = await startServer([], { BERTH_MAX_STREAMS_PER_TOKEN: String(CAP) });
  env = await createEnvironment(server);
  sleeper = (await submit(server, env, ['sleep', '600'])).id;
});
afterAll(async () => {
  if (sleeper) await server?.call(`/v1/executions/${sleeper}/cancel`, { method: 'POST', body: {} }).catch(() => undefined);
  await server?.close();
});

/** One stream of each route in turn, held open (the client reads nothing; the execution runs on). */
const routes = [
  (id: string) => ({ path: `/v1/executions/${id}/stream`, kind: 'ws' as const }),
  (id: string) => ({ path: `/v1/executions/${id}/events`, kind: 'sse' as const }),
  () => ({ path: '/v1/events', kind: 'sse' as const }),
];
const open = (n: number, headers = auth()) => {
  const route = routes[n % routes.length]!(sleeper);
  return openStalled(server.url, route.path, route.kind, headers);
};

/** Retries `attempt` until it opens (the server sees a close a moment after the client makes it). */
async function eventually(attempt: () => Promise<StalledClient>): Promise<StalledClient> {
  const deadline = Date.now() + 5000;
  for (;;) {
    const client = await attempt();
    if (client.status !== 429 || Date.now() > deadline) return client;
    client.socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('the per-token stream cap', () => {
  it('refuses the fourth stream of a token on every streaming route with 429 too_many_streams; another token gets one', async () => {
    const held = [await open(0), await open(1), await open(2)];
    expect(held.map((c) => c.status)).toEqual([101, 200, 200]);
    for (let n = 0; n < routes.length; n++) {
      const refused = await open(n);
      expect(refused.status).toBe(429);
      const body = JSON.parse((await refused.drain()).toString().replace(/^[^{]*/, '')); // skip a chunk-size line
      expect(body.error).toMatchObject({ code: 'too_many_streams', detail: { max_streams: CAP } });
    }
    // The query token is the same token: it shares the cap.
    expect((await openStalled(server.url, `/v1/events?token=${tokens.alice}`, 'sse')).status).toBe(429);
    const bobs = await openStalled(server.url, '/v1/events', 'sse', auth(tokens.bob));
    expect(bobs.status).toBe(200);

    // A closed stream gives its slot back.
    held[0]!.socket.destroy();
    const again = await eventually(() => open(0));
    expect(again.status).toBe(101);
    for (const client of [...held, again, bobs]) client.socket.destroy();
  });

  it('gives slots back when streams complete, and refused requests take none', async () => {
    const done = await submit(server, env, ['echo', 'hello']);
    await finished(server, done.id);
    await new Promise((resolve) => setTimeout(resolve, 200)); // the first test's closes reach the server
    for (let i = 0; i < 2 * CAP; i++) {
      const s = rawConnect(`${server.url.replace('http', 'ws')}/v1/executions/${done.id}/stream`, auth());
      expect(await s.closed).toBe(1000);
      const missing = await server.call('/v1/executions/ex_missing/events', { headers: { accept: 'text/event-stream' } });
      expect(missing.status).toBe(404);
      await missing.arrayBuffer();
    }
    const full = await Promise.all(Array.from({ length: CAP }, (_, n) => eventually(() => open(n))));
    expect(full.map((c) => c.status)).toEqual([101, 200, 200]);
    expect((await open(0)).status).toBe(429);
    for (const client of full) client.socket.destroy();
  });
});
