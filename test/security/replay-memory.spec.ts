/**
 * A stream's full replay (`GET /v1/streams/{stream}`) cannot make the server hold the stream: against a real
 * `berth serve`, a member grows one environment's stream with updates whose every step is large (a 4,000-character
 * description and entry, shown before and after), then opens replays of it that take nothing of their answers. The
 * replay was folded whole, every step kept, then written as one string: each reader held the whole answer (here
 * 47 MiB; 12 readers +2.2 GB). Now it is folded and written a page at a time as the client takes it (+77 MB): the
 * server grows by far less than the answers, answers meanwhile, and every reader gets the whole replay once it reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { healthLatency, openStalledGets, residentGrowth } from './stalled-client.ts';

const MiB = 1024 * 1024;
const UPDATES = 2_000;
const READERS = 12;

let server: BerthServer;
beforeAll(async () => {
  // The member writes its 2,000 steps as fast as the server takes them: unpaced (the pace has its own spec).
  server = await startServer([], { BERTH_RATE_LIMIT: '0' });
});
afterAll(() => server?.close());

describe('full replays', () => {
  it(`are not held in memory: ${READERS} stalled readers of a stream of ${UPDATES} large steps`, { timeout: 240_000 }, async () => {
    const env = await server.json('/v1/environments', { body: { name: 'long' }, token: tokens.alice });
    for (let i = 0; i < UPDATES; i++) {
      const text = `${i}`.padEnd(4000, String.fromCharCode(97 + (i % 26)));
      await server.json(`/v1/environments/${env.id}`, { method: 'PUT', body: { description: text, entry: text }, token: tokens.alice });
    }
    const path = `/v1/streams/environment-${env.id}`;

    const { result: readers, grown, label } = await residentGrowth(server.process.child.pid!, async () => {
      const stalled = await openStalledGets(server.url, READERS, () => path, { Authorization: `Bearer ${tokens.alice}` }, 3_000);
      expect(await healthLatency(server.url, 5_000)).toBeLessThan(5_000);
      return stalled;
    });
    expect(grown, label).toBeLessThan(256 * MiB);
    for (const reader of readers) {
      expect(reader.head).toMatch(/^HTTP\/1\.1 200/);
      const body = await reader.drain();
      // Chunked: the JSON array is between the first chunk's size line and the last chunk.
      const steps = JSON.parse(dechunked(body));
      expect(steps).toHaveLength(UPDATES + 1);
      expect(steps.map((s: { event: { revision: string } }) => Number(s.event.revision))).toEqual(Array.from({ length: UPDATES + 1 }, (_, i) => i));
      expect(steps.at(-1).contextDiff.description.after).toMatch(new RegExp(`^${UPDATES - 1}`));
    }
    // Another tenant cannot replay it.
    expect((await server.call(path, { token: tokens.bob })).status).toBe(404);
  });
});

/** The body of a chunked HTTP/1.1 answer. */
function dechunked(raw: Buffer): string {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = raw.indexOf('\r\n', at);
    const size = parseInt(raw.toString('latin1', at, lineEnd), 16);
    if (!size) return Buffer.concat(parts).toString();
    parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
}
