/**
 * The request log's URL redaction against a hostile client (DESIGN §13: nobody exhausts the server for others). Every
 * answered request is logged at info with its URL redacted, and the redaction looked at each prefix of a query pair
 * through an `=` (a token may hold `=`), decoding and searching each one: a pair of n `=` cost n times its length. A
 * 15 KB `?a=====…` held the event loop about a second per request, with no token at all (refused requests are logged
 * too): eight of them froze `/healthz` for eight seconds. Against a real `berth serve` logging at info: such requests
 * and the other long URL shapes (many segments, many pairs) cost the server milliseconds, and a token hidden in a pair
 * of many `=` still never reaches the log.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';

let server: BerthServer;

beforeAll(async () => {
  server = await startServer([], { BERTH_LOG_LEVEL: 'info' });
}, 120_000);
afterAll(() => server?.close());

/** A request without a token; resolves with its status once the answer is read (its log line is then due). */
async function unauthenticated(path: string): Promise<number> {
  const response = await fetch(`${server.url}${path}`);
  await response.arrayBuffer();
  return response.status;
}

/** How long the server takes to answer /healthz while `requests` are being answered and logged. */
async function healthzDuring(requests: string[]): Promise<{ ms: number; statuses: number[] }> {
  const started = performance.now();
  const statuses = await Promise.all(requests.map(unauthenticated));
  const health = await fetch(`${server.url}/healthz`);
  expect(health.status).toBe(200);
  await health.arrayBuffer();
  return { ms: performance.now() - started, statuses };
}

describe('the request log under long URLs', () => {
  it('answers /healthz at once while refused requests with a 15 KB run of `=` are logged', async () => {
    const path = `/v1/capabilities?a${'='.repeat(15_000)}`;
    const { ms, statuses } = await healthzDuring(Array.from({ length: 8 }, () => path));
    expect(statuses.every((s) => s === 401)).toBe(true);
    // Eight of them took about 8 s before the fix; a few milliseconds each now (loose bound: a shared machine).
    expect(ms).toBeLessThan(2_000);
  });

  it('costs little for the other long shapes: many `=` pairs, many segments, many pairs, encoded runs', async () => {
    const shapes = [
      `/v1/capabilities?${`${'a'.repeat(900)}=`.repeat(16)}`,
      `/v1/capabilities?x=${'%3D='.repeat(3_000)}`,
      `/v1${'/aaaaaaaaaaaaaaaaa'.repeat(800)}`,
      `/v1/x${'/'.repeat(14_000)}`,
      `/v1/capabilities?${'a=b&'.repeat(3_500)}`,
    ];
    const { ms } = await healthzDuring(shapes.flatMap((s) => [s, s]));
    expect(ms).toBeLessThan(3_000);
  });

  it('still keeps a token out of the log when it hides in a pair of many `=`', async () => {
    const carriers = [
      `/v1/capabilities?${tokens.alice}${'='.repeat(40)}`,
      `/v1/capabilities?x=${'='.repeat(40)}${tokens.alice}`,
      `/v1/capabilities?${'='.repeat(40)}&${tokens.bob}=1`,
    ];
    for (const path of carriers) expect(await unauthenticated(path)).toBe(401);
    await fetch(`${server.url}/healthz`).then((r) => r.arrayBuffer());
    await new Promise((resolve) => setTimeout(resolve, 300)); // the last log lines reach the pipe
    const output = `${server.process.lines.join('\n')}\n${server.process.stderr()}`;
    expect(output).toContain('[redacted]');
    for (const token of [tokens.alice, tokens.bob]) expect(output).not.toContain(token);
  });
});
