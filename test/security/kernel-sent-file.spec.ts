/**
 * Large file reads answered by sendfile (src/gateway/kernel-sent-body.ts, src/providers/send-file.c) against hostile
 * members over HTTP through the real gateway: the kernel writes to a socket number it duplicated, so two tenants'
 * reads at once never get each other's bytes; readers that take nothing hold no more than two pool threads, for 20 ms
 * at a time, so the server answers everyone else meanwhile; and a reader cut off leaves no descriptor behind.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectStatus, q, tenant, type Tenant } from '../integration/workspace-http.ts';

const SIZE = 4 * 1024 * 1024;
let gw: RunningGateway;
let alice: Tenant;
let bob: Tenant;
const bytes = { alice: randomBytes(SIZE), bob: randomBytes(SIZE) };
const version = (data: Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;
const openDescriptors = () => readdirSync('/proc/self/fd').length;

beforeAll(async () => {
  gw = await startGateway();
  alice = await tenant(gw, tokens.alice);
  bob = await tenant(gw, tokens.bob);
  await expectStatus(call(gw, 'PUT', `${alice.files}${q('big.bin')}`, { token: tokens.alice, body: bytes.alice }), 200);
  await expectStatus(call(gw, 'PUT', `${bob.files}${q('big.bin')}`, { token: tokens.bob, body: bytes.bob }), 200);
  // Settled: from here on a read is sent from the file (its version remembered).
  await sleep(2_100);
}, 30_000);
afterAll(() => gw?.close());

/** A GET whose answer is left unread after its head (the socket fills and stays full). */
async function stalledRead(t: Tenant): Promise<{ request: ClientRequest; response: IncomingMessage }> {
  const { port } = new URL(gw.url);
  const request = httpRequest({ host: '127.0.0.1', port, path: `${t.files}${q('big.bin')}`, headers: gw.headers(t.token) });
  request.on('error', () => undefined);
  const answered = new Promise<IncomingMessage>((resolve) => request.once('response', resolve));
  request.end();
  const response = await answered;
  response.pause();
  response.on('error', () => undefined);
  return { request, response };
}

describe('large reads sent by the kernel, against hostile members', () => {
  it("two tenants reading at once get their own bytes, every time", { timeout: 60_000 }, async () => {
    const read = async (t: Tenant, mine: Buffer) => {
      const answer = await call(gw, 'GET', `${t.files}${q('big.bin')}`, { token: t.token });
      expect(answer.status).toBe(200);
      expect(answer.headers.get('x-berth-version')).toBe(version(mine));
      expect(answer.bytes.equals(mine)).toBe(true);
    };
    for (let round = 0; round < 5; round++) {
      await Promise.all(Array.from({ length: 4 }, () => [read(alice, bytes.alice), read(bob, bytes.bob)]).flat());
    }
  });

  it('readers that take nothing leave the server answering everyone else, and leave no descriptor when cut off', { timeout: 60_000 }, async () => {
    const before = openDescriptors();
    const stalled = await Promise.all(Array.from({ length: 6 }, () => stalledRead(alice)));
    // Each stalled reader's send gives up its pool thread within 20 ms of its socket filling.
    await sleep(200);
    const started = Date.now();
    const health = await call(gw, 'GET', '/healthz');
    expect(health.status).toBe(200);
    const other = await call(gw, 'GET', `${bob.files}${q('big.bin')}`, { token: tokens.bob });
    expect(other.bytes.equals(bytes.bob)).toBe(true);
    expect(Date.now() - started).toBeLessThan(2_000);

    for (const { request, response } of stalled) {
      response.destroy();
      request.destroy();
    }
    // Every file and duplicated socket let go (the server is this process).
    let now = openDescriptors();
    for (const deadline = Date.now() + 5_000; now > before && Date.now() < deadline; now = openDescriptors()) await sleep(50);
    expect(now).toBeLessThanOrEqual(before);
  });
});
