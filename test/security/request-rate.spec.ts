/**
 * The pace per member token (DESIGN §13: a tenant must not exhaust the server for others), against a real
 * `berth serve` with 2 requests a second and a burst of 6 (slow, so a refusal's window is wide on a busy machine): a token's flood is refused past its bucket with
 * `rate_limited` (429, Retry-After, detail.retry_after_ms) before anything is done or its body read, on every route
 * (a stream opened with `?token=` too); another member and the admin are served meanwhile; the token is admitted again
 * after the wait it was told; and the SDK waits out the pace by itself.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Berth } from '../../src/client/berth-client.ts';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { openStalled } from './stalled-client.ts';

const RATE = 2;
const BURST = 6;
let server: BerthServer;

beforeAll(async () => {
  server = await startServer([], { BERTH_RATE_LIMIT: String(RATE), BERTH_RATE_BURST: String(BURST) });
});
afterAll(async () => {
  await server?.close();
});

const list = (token: string) => server.call('/v1/environments?limit=500', { token });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Empties the token's bucket; answers the last refusal's body and Retry-After. */
async function exhaust(token: string): Promise<{ body: any; retryAfter: string | null }> {
  for (;;) {
    const answers = await Promise.all(Array.from({ length: BURST }, () => list(token)));
    const refused = answers.filter((r) => r.status === 429);
    await Promise.all(answers.filter((r) => r.status !== 429).map((r) => r.text()));
    if (refused.length > 0) {
      for (const r of refused.slice(1)) await r.text();
      return { body: await refused[0]!.json(), retryAfter: refused[0]!.headers.get('retry-after') };
    }
  }
}

describe('the request rate of a member token', () => {
  it('refuses a flood past the burst with rate_limited, while another member and the admin are served', async () => {
    await sleep((BURST / RATE) * 1000); // a full bucket, whatever ran before
    const started = performance.now();
    const [flood, bobs, admins] = await Promise.all([
      Promise.all(Array.from({ length: 200 }, () => list(tokens.alice).then(async (r) => ({ status: r.status, retryAfter: r.headers.get('retry-after'), body: await r.json() })))),
      (async () => {
        const statuses: number[] = [];
        for (let i = 0; i < BURST; i++) statuses.push((await list(tokens.bob).then(async (r) => (await r.text(), r))).status);
        return statuses;
      })(),
      Promise.all(Array.from({ length: 100 }, () => list(tokens.admin).then(async (r) => (await r.text(), r.status)))),
    ]);
    const seconds = (performance.now() - started) / 1000;
    const admitted = flood.filter((a) => a.status === 200).length;
    const refused = flood.filter((a) => a.status === 429);
    expect(admitted).toBeGreaterThanOrEqual(BURST);
    expect(admitted).toBeLessThanOrEqual(BURST + Math.ceil(RATE * seconds) + 1);
    expect(refused.length + admitted).toBe(200);
    for (const a of refused) {
      expect(a.body.error).toMatchObject({ code: 'rate_limited', detail: { requests_per_second: RATE, burst: BURST } });
      expect(a.body.error.detail.retry_after_ms).toBeGreaterThan(0);
      expect(a.body.error.detail.retry_after_ms).toBeLessThanOrEqual(1000 / RATE);
      expect(a.retryAfter).toBe('1');
    }
    expect(bobs).toEqual(Array(BURST).fill(200)); // his own bucket, whole
    expect(admins).toEqual(Array(100).fill(200));
  });

  it('does nothing for a refused request: of a flood of creations, exactly those answered 201 exist', async () => {
    await sleep((BURST / RATE) * 1000);
    const names = Array.from({ length: 30 }, (_, i) => `paced ${Date.now()} ${i}`);
    const statuses = await Promise.all(
      names.map((name) => server.call('/v1/environments', { token: tokens.alice, body: { name, profile: {} } }).then(async (r) => (await r.text(), r.status))),
    );
    expect(new Set(statuses)).toEqual(new Set([201, 429]));
    await sleep((BURST / RATE) * 1000);
    const listed = new Set(((await (await list(tokens.alice)).json()) as { name: string }[]).map((e) => e.name));
    expect(names.filter((name) => listed.has(name))).toEqual(names.filter((_, i) => statuses[i] === 201));
  });

  it('refuses before reading the body: a 2 MiB body past the bucket is rate_limited, not body_too_large, and answered', async () => {
    await exhaust(tokens.alice);
    const big = await server.call('/v1/environments', { token: tokens.alice, body: { name: 'big', profile: {}, padding: 'x'.repeat(2 * 1024 * 1024) } });
    expect(big.status).toBe(429);
    expect((await big.json()).error.code).toBe('rate_limited');
  });

  it('counts a stream opened with ?token= against the same token, before it opens', async () => {
    await exhaust(tokens.alice);
    const stream = await openStalled(server.url, `/v1/events?token=${tokens.alice}`, 'sse');
    expect(stream.status).toBe(429);
    expect((await stream.drain()).toString()).toContain('rate_limited');
  });

  it('is waited out by the SDK: every request of a burst past the bucket is answered, paced', async () => {
    await exhaust(tokens.alice);
    const berth = await Berth.connect({ url: server.url, token: tokens.alice });
    const started = performance.now();
    const pages = await Promise.all(Array.from({ length: 6 }, () => berth.environments.page({ limit: 1 })));
    expect(pages.map((p) => p.items.length)).toEqual(Array(6).fill(1));
    // 6 requests past an empty bucket at 2 a second take about 3 s.
    expect(performance.now() - started).toBeGreaterThan(2000);
  });
});
