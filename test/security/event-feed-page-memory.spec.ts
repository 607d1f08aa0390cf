/**
 * A member holding server memory through the audit feed (DESIGN §13: streams cost bounded memory per client), against
 * a real `berth serve`: its executions carry commands of about 1 MB (the JSON body limit allows that), so each
 * `execution.accepted` event is about 1 MB, then it opens its 32 feeds (`GET /v1/events`, the per-token cap) from the
 * start and never reads them. A feed's subscription read the event table 256 rows at a time and held that page until
 * its client took every event of it: 48 such events were about 30 MB per feed, 960 MB for the 32 (and 256 of them
 * would be 8 GB). The SQLite store now ends a subscription's page once its payloads reach
 * 1 MiB (at least one event), so the 32 stalled feeds hold a few MB each, whatever the events behind them.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { healthLatency, openStalled, residentBytes, type StalledClient } from './stalled-client.ts';

const MB = 1_000_000;
const BIG_EXECUTIONS = 48;
const FEEDS = 32;
/** About 960 KB of arguments: a command that fits the 1 MiB JSON body (and Linux's 128 KiB per argument). */
const bigCommand = ['true', ...Array.from({ length: 16 }, () => 'x'.repeat(60_000))];

let server: BerthServer;

beforeAll(async () => {
  server = await startServer([], { BERTH_STREAM_STALL_MS: '120000' });
  const env = await createEnvironment(server);
  let made = 0;
  // Six at a time, each waited for: under the scope's concurrent-executions quota.
  await Promise.all(
    Array.from({ length: 6 }, async () => {
      while (made < BIG_EXECUTIONS) {
        made++;
        const record = await submit(server, env, bigCommand);
        expect((await finished(server, record.id)).status).toBe('exited');
      }
    }),
  );
}, 300_000);

afterAll(() => server?.close());

it('should hold a few MB per stalled audit feed however large the events behind it are', async () => {
  const pid = server.process.child.pid!;
  const before = residentBytes(pid);
  const feeds: StalledClient[] = [];
  try {
    for (let i = 0; i < FEEDS; i++) feeds.push(await openStalled(server.url, '/v1/events', 'sse', { authorization: `Bearer ${tokens.alice}` }));
    expect(feeds.every((f) => f.status === 200)).toBe(true);
    let peak = before;
    let slowest = 0;
    for (let i = 0; i < 16; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      peak = Math.max(peak, residentBytes(pid));
      slowest = Math.max(slowest, await healthLatency(server.url, 10_000));
    }
    const grown = peak - before;
    console.log(`32 stalled feeds over ${BIG_EXECUTIONS} events of ~1 MB: RSS +${(grown / MB).toFixed(0)} MB, slowest /healthz ${slowest.toFixed(0)} ms`);
    // Before: 960 MB (a 256-row page per feed). After: 130 MB (a 1 MiB page, the event being sent).
    expect(grown).toBeLessThan(500 * MB);
    expect(slowest).toBeLessThan(10_000);
  } finally {
    for (const f of feeds) f.socket.destroy();
  }
}, 120_000);
