/**
 * A member's plain tar made of nothing but extended headers (pax `x` records with keys never seen before, pax `g`
 * globals, GNU `L` long names), sent against a real `berth serve`. These headers are no members: the reader never
 * counted them on the import's caps, and it kept every pax key of a run of `x` headers, copying the whole set again
 * at each one. A stream of them made the server hold an ever-growing set of keys (each copy blocking the event loop
 * longer) and read forever. Now their bytes count on the archive's byte cap, only the keys Berth uses are kept, and a
 * run of them before one member is bounded: the import is refused (`environment_invalid`) and the server answers
 * everyone meanwhile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tarHeader } from '../unit/content/crafted-tar.ts';
import { createEnvironment, startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { postEndless } from '../e2e/endless-body.ts';
import { healthLatency, residentBytes } from './stalled-client.ts';

const MiB = 1024 * 1024;
const BLOCK = 512;

let server: BerthServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

/** One pax header of `type` whose body is about 1 MiB of records `<len> k<n>=\n`, every key new. */
function paxFlood(type: 'x' | 'g', first: number): { block: Buffer; next: number } {
  const records: Buffer[] = [];
  let bytes = 0;
  let n = first;
  while (bytes < MiB - 64) {
    const body = ` k${n++}=\n`;
    let length = body.length + 1;
    while (String(length).length + body.length !== length) length = String(length).length + body.length;
    const record = Buffer.from(`${length}${body}`);
    records.push(record);
    bytes += record.length;
  }
  const meta = Buffer.concat(records);
  const pad = Buffer.alloc((BLOCK - (meta.length % BLOCK)) % BLOCK);
  return { block: Buffer.concat([tarHeader({ name: 'PaxHeader', type, size: meta.length }), meta, pad]), next: n };
}

/** POSTs an endless plain tar of extended headers (`make` gives the next one) as alice, for at most `maxBytes`. */
const flood = (path: string, make: () => Buffer, maxBytes: number) => postEndless(`${server.url}${path}`, tokens.alice, 'application/x-tar', make, maxBytes);

describe('a tar of nothing but extended headers', () => {
  it('pax `x` headers with ever new keys: refused, the server holds no key set and keeps answering', { timeout: 180_000 }, async () => {
    const env = await createEnvironment(server);
    // Made before the probe starts: making them (100,000 records a header) would hold this process's event loop, and
    // the probe's latency would be this process's, not the server's.
    const headers: Buffer[] = [];
    for (let n = 0; headers.length < 24; ) {
      const made = paxFlood('x', n);
      n = made.next;
      headers.push(made.block);
    }
    const pid = server.process.child.pid!;
    const before = residentBytes(pid);
    let peak = before;
    let slowest = 0;
    let probing = true;
    const probe = (async () => {
      while (probing) {
        slowest = Math.max(slowest, await healthLatency(server.url, 10_000));
        peak = Math.max(peak, residentBytes(pid));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    let next = 0;
    const answer = await flood(`/v1/environments/${env}/import`, () => headers[next++ % headers.length], 24 * MiB).finally(async () => {
      probing = false;
      await probe;
    });
    expect(answer.status, JSON.stringify(answer.body)?.slice(0, 300)).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'environment_invalid' });
    expect(slowest, '/healthz latency during the flood (ms)').toBeLessThan(1000);
    expect(peak - before, `RSS ${before} -> peak ${peak}`).toBeLessThan(256 * MiB);
  });

  it('a run of them is bounded: `g` and `L` headers without a member are refused early', { timeout: 60_000 }, async () => {
    const env = await createEnvironment(server);
    const long = Buffer.alloc(MiB, 0x61);
    const L = Buffer.concat([tarHeader({ name: '././@LongLink', type: 'L', size: long.length }), long]);
    const g = paxFlood('g', 0).block;
    let i = 0;
    const answer = await flood(`/v1/environments/${env}/import`, () => (i++ % 2 === 0 ? L : g), 64 * MiB);
    expect(answer.status, `no answer after ${answer.sent} bytes`).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'environment_invalid', detail: { reason: 'corrupt_archive' } });
    expect(await healthLatency(server.url, 5000)).toBeLessThan(5000);
  });

  it('their bytes count on the archive cap: 1 MiB long names, each before an empty member, are refused at the cap', { timeout: 180_000 }, async () => {
    const env = await createEnvironment(server);
    const long = Buffer.alloc(MiB, 0x61);
    // Each unit: a 1 MiB GNU long name (dropped: name_too_long) and the empty member it names.
    const unit = Buffer.concat([tarHeader({ name: '././@LongLink', type: 'L', size: long.length }), long, tarHeader({ name: 'short', type: '0', size: 0 })]);
    const answer = await flood(`/v1/environments/${env}/import`, () => unit, 1024 * MiB);
    expect(answer.status, `no answer after ${answer.sent} bytes`).toBe(400);
    expect(answer.body.error).toMatchObject({ code: 'environment_invalid', detail: { reason: 'too_large' } });
    expect(answer.sent).toBeLessThan(700 * MiB);
    expect(await healthLatency(server.url, 5000)).toBeLessThan(5000);
  });
});
