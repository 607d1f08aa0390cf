/**
 * Large file reads sent natively (src/gateway/native-sent-body.ts, src/providers/send-file.c) against hostile members
 * over HTTP through the real gateway: the native code writes to a socket number it duplicated, so two tenants' reads
 * at once never get each other's bytes; readers that take nothing hold no more than two pool threads, for 20 ms at a
 * time, so the server answers everyone else meanwhile; a reader cut off leaves no descriptor behind; and a file
 * changed in place while it is sent never has its last chunk sent (the answer stops short of its content-length), nor
 * does one cut short under its mapping, which leaves the server answering.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, truncateSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:net';
import { once } from 'node:events';
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
/** Far more than a loopback socket holds unread, so its send is still under way when the file changes. */
const CHANGING_SIZE = 48 * 1024 * 1024;
const changing = randomBytes(CHANGING_SIZE);
const version = (data: Buffer) => `sha256:${createHash('sha256').update(data).digest('hex')}`;
const openDescriptors = () => readdirSync('/proc/self/fd').length;

beforeAll(async () => {
  gw = await startGateway();
  alice = await tenant(gw, tokens.alice);
  bob = await tenant(gw, tokens.bob);
  await expectStatus(call(gw, 'PUT', `${alice.files}${q('big.bin')}`, { token: tokens.alice, body: bytes.alice }), 200);
  await expectStatus(call(gw, 'PUT', `${bob.files}${q('big.bin')}`, { token: tokens.bob, body: bytes.bob }), 200);
  await expectStatus(call(gw, 'PUT', `${alice.files}${q('changing.bin')}`, { token: tokens.alice, body: changing }), 200);
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

/**
 * A raw GET of alice's `name` that stops reading once the head came; `meanwhile` runs while the socket is full and
 * the send waits for room; then the whole answer is read until the server closes. Answers the head and the body.
 */
async function readAcross(name: string, meanwhile: () => void): Promise<{ head: string; body: Buffer }> {
  const { port } = new URL(gw.url);
  const socket = connect({ host: '127.0.0.1', port: Number(port) });
  await once(socket, 'connect');
  const headers = Object.entries(gw.headers(alice.token)).map(([k, v]) => `${k}: ${v}\r\n`).join('');
  socket.write(`GET ${alice.files}${q(name)} HTTP/1.1\r\nhost: x\r\n${headers}connection: close\r\n\r\n`);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => undefined);
  const closed = once(socket, 'close');
  while (Buffer.concat(chunks).indexOf('\r\n\r\n') < 0) await once(socket, 'data');
  // Unread for a moment, the socket fills and the send waits for room (far less than the file fits in it).
  socket.pause();
  meanwhile();
  await sleep(5);
  socket.resume();
  await closed;
  const answer = Buffer.concat(chunks);
  const split = answer.indexOf('\r\n\r\n');
  return { head: answer.subarray(0, split).toString(), body: answer.subarray(split + 4) };
}

describe('large reads sent natively, against hostile members', () => {
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

  it('a file changed in place while it is sent never has its last chunk sent: the answer stops short', { timeout: 60_000 }, async () => {
    // A command of the turn rewrites the last byte in place.
    const { head, body } = await readAcross('changing.bin', () => {
      const fd = openSync(join(alice.root, 'changing.bin'), 'r+');
      writeSync(fd, Buffer.from([changing[CHANGING_SIZE - 1]! ^ 0xff]), 0, 1, CHANGING_SIZE - 1);
      closeSync(fd);
    });
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(head).toContain(`x-berth-version: ${version(changing)}`);
    expect(body.length).toBeLessThan(CHANGING_SIZE);
    expect(body.equals(changing.subarray(0, body.length))).toBe(true);
  });

  it('a file cut short while it is sent from its mapping ends the answer short, and the server answers on', { timeout: 60_000 }, async () => {
    await expectStatus(call(gw, 'PUT', `${alice.files}${q('shrinking.bin')}`, { token: tokens.alice, body: changing }), 200);
    await sleep(2_100); // settled: sent from the file
    // A command of the turn truncates it to a quarter: the mapped pages past the new end are gone.
    const { head, body } = await readAcross('shrinking.bin', () => truncateSync(join(alice.root, 'shrinking.bin'), CHANGING_SIZE / 4));
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    expect(body.length).toBeLessThan(CHANGING_SIZE);
    expect(body.equals(changing.subarray(0, body.length))).toBe(true);
    const again = await call(gw, 'GET', `${bob.files}${q('big.bin')}`, { token: tokens.bob });
    expect(again.status).toBe(200);
    expect(again.bytes.equals(bytes.bob)).toBe(true);
  });
});
