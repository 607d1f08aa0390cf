/**
 * The client's answer to `rate_limited` (src/client/http-transport.ts), against a real loopback server that refuses
 * the first requests: a request whose body can be sent again is, after the wait the server named, through the
 * direct and the fetch path alike; a streamed body cannot be, so the error reaches the caller at once.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { BerthApiError } from '../../../src/client/berth-api-error.ts';
import { HttpTransport } from '../../../src/client/http-transport.ts';

let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
});

/** Answers the first `refusals` requests rate_limited (retry in 100 ms), then echoes the body; counts requests. */
async function pacedServer(refusals: number): Promise<{ url: string; requests: () => number }> {
  let requests = 0;
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
      const refused = requests++ < refusals;
      const body = refused
        ? { error: { code: 'rate_limited', message: 'slow down', detail: { retry_after_ms: 100 } } }
        : { echoed: Buffer.concat(chunks).toString() };
      const text = JSON.stringify(body);
      // Sized, as Berth's answers are (the direct path reads only those).
      res.writeHead(refused ? 429 : 200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...(refused ? { 'retry-after': '1' } : {}) });
      res.end(text);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests: () => requests };
}

describe('a rate_limited answer', () => {
  it('is waited out and the request sent again as it was, directly and through fetch', async () => {
    const { url, requests } = await pacedServer(2);
    const transport = new HttpTransport(url, 'token');
    const started = performance.now();
    expect(await transport.json('POST', '/things', { body: { a: 1 } })).toEqual({ echoed: '{"a":1}' });
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(requests()).toBe(3);

    const again = await pacedServer(1);
    const response = await new HttpTransport(again.url, 'token').send('PUT', '/file', { bytes: { stream: Buffer.from('bytes'), contentType: 'application/octet-stream' } });
    expect(await response.json()).toEqual({ echoed: 'bytes' });
    expect(again.requests()).toBe(2);
  });

  it('reaches the caller at once for a streamed body, which cannot be sent again', async () => {
    const { url, requests } = await pacedServer(1);
    async function* body() {
      yield Buffer.from('once');
    }
    const error = await new HttpTransport(url, 'token').send('PUT', '/file', { bytes: { stream: body(), contentType: 'application/octet-stream' } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BerthApiError);
    expect((error as BerthApiError).code).toBe('rate_limited');
    expect(requests()).toBe(1);
  });

  it('is retryable, so followers and retried calls back off and ask again instead of failing (a quota is not)', () => {
    expect(BerthApiError.fromBody(429, JSON.stringify({ error: { code: 'rate_limited', message: 'slow down', detail: {} } })).retryable).toBe(true);
    expect(BerthApiError.fromBody(429, JSON.stringify({ error: { code: 'quota_exceeded', message: 'full', detail: {} } })).retryable).toBe(false);
  });

  it('stops waiting when the caller aborts, with the refusal', async () => {
    const { url } = await pacedServer(100);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 250);
    const error = await new HttpTransport(url, 'token').json('GET', '/things', { signal: controller.signal }).catch((e: unknown) => e);
    expect((error as BerthApiError).code).toBe('rate_limited');
  });
});
