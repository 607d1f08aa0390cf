/**
 * The SDK's direct requests (src/client/direct-http.ts) against real servers on loopback: a plain answer read whole
 * into one buffer over one kept-alive connection, a kept connection the server closed let go for a new one, and every
 * answer that is not the plain case (chunked, unsized, too large, a head too long, more bytes than declared, an abort)
 * refused with a TypeError without reading on, while the transport then answers the same bytes through fetch.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DirectHttp } from '../../../src/client/direct-http.ts';
import { HttpTransport } from '../../../src/client/http-transport.ts';

const BODY = randomBytes(4 * 1024 * 1024);
let servers: (Server | TcpServer)[] = [];

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ url: URL; connections: () => number; server: Server }> {
  let connections = 0;
  const server = createServer(handler);
  server.on('connection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return { url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/file`), connections: () => connections, server };
}

/** A server that answers every request with `raw` bytes as they are. */
async function rawServer(raw: Buffer): Promise<URL> {
  const server = createTcpServer((socket) => socket.on('error', () => undefined).once('data', () => socket.write(raw)));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/file`);
}

afterEach(async () => {
  for (const s of servers) {
    (s as Server).closeAllConnections?.();
    s.close();
  }
  servers = [];
});

describe('direct requests', () => {
  it('reads a 4 MiB answer whole, sends a 4 MiB body whole, and keeps one connection for both', async () => {
    const { url, connections } = await serve((req, res) => {
      if (req.method === 'GET') return res.end(BODY);
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => res.end(JSON.stringify({ same: Buffer.concat(chunks).equals(BODY), type: req.headers['content-type'] })));
    });
    const direct = new DirectHttp();
    const got = await direct.request('GET', url, { authorization: 'Bearer x' }, undefined, BODY.length);
    expect(got!.status).toBe(200);
    expect(got!.body.equals(BODY)).toBe(true);
    expect(got!.header('content-length')).toBe(String(BODY.length));
    const put = await direct.request('PUT', url, { 'content-type': 'application/octet-stream' }, BODY, 1024);
    expect(JSON.parse(put!.body.toString())).toEqual({ same: true, type: 'application/octet-stream' });
    expect((await direct.request('GET', url, {}, undefined, BODY.length))!.body.equals(BODY)).toBe(true);
    expect(connections()).toBe(1);
  });

  it('answers an error status as it is', async () => {
    const error = '{"error":{"code":"not_found"}}';
    const { url } = await serve((_req, res) => res.writeHead(404, { 'content-type': 'application/json', 'content-length': error.length }).end(error));
    const got = await new DirectHttp().request('GET', url, {}, undefined, 1024);
    expect(got!.status).toBe(404);
    expect(JSON.parse(got!.body.toString())).toEqual({ error: { code: 'not_found' } });
  });

  it('answers a 204 (no content-length: it never has a body) and keeps the connection', async () => {
    const { url, connections } = await serve((_req, res) => res.writeHead(204).end());
    const direct = new DirectHttp();
    for (let i = 0; i < 2; i++) {
      const got = await direct.request('DELETE', url, {}, undefined, 10);
      expect(got!.status).toBe(204);
      expect(got!.body.length).toBe(0);
    }
    expect(connections()).toBe(1);
  });

  it('lets go of a kept connection the server closed, and opens a new one for the next request', async () => {
    const { url, connections, server } = await serve((_req, res) => res.end('ok'));
    const direct = new DirectHttp();
    expect((await direct.request('GET', url, {}, undefined, 10))!.body.toString()).toBe('ok');
    server.closeIdleConnections(); // as at the server's keep-alive timeout
    expect((await direct.request('GET', url, {}, undefined, 10))!.body.toString()).toBe('ok');
    expect(connections()).toBe(2);
  });

  it('sends a POST on a kept connection only while it has been idle under a second, else on a new one', async () => {
    const { url, connections } = await serve((_req, res) => res.end('ok'));
    const direct = new DirectHttp();
    await direct.request('POST', url, {}, Buffer.from('{}'), 10);
    await direct.request('POST', url, {}, Buffer.from('{}'), 10);
    expect(connections()).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await direct.request('POST', url, {}, Buffer.from('{}'), 10);
    expect(connections()).toBe(2);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    await direct.request('GET', url, {}, undefined, 10); // a GET may be sent again: it takes the kept one
    expect(connections()).toBe(2);
  });

  it('fails a request no server answers as fetch does: a TypeError "fetch failed" with the socket\'s error as its cause', async () => {
    const { url, server } = await serve((_req, res) => res.end('ok'));
    server.close();
    await once(server, 'close');
    const error = await new DirectHttp().request('POST', url, {}, Buffer.from('{}'), 10).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as TypeError).message).toBe('fetch failed');
    expect(((error as TypeError).cause as { code?: string }).code).toBe('ECONNREFUSED');
  });

  it('the transport sends JSON requests directly: the body and its type arrive, an error answer is a BerthApiError', async () => {
    const seen: { method: string; type: string | undefined; body: string }[] = [];
    const { url, connections } = await serve((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => {
        seen.push({ method: req.method!, type: req.headers['content-type'], body: Buffer.concat(chunks).toString() });
        res.statusCode = req.url === '/missing' ? 404 : 201;
        res.setHeader('content-type', 'application/json'); // node sizes what end() is given: the plain case
        res.end(req.url === '/missing' ? '{"error":{"code":"not_found","message":"no such thing","detail":{}}}' : '{"id":"x1"}');
      });
    });
    const transport = new HttpTransport(url.origin, 'token');
    expect(await transport.json('POST', '/things', { body: { name: 'a' } })).toEqual({ id: 'x1' });
    expect(await transport.json('GET', '/things/x1')).toEqual({ id: 'x1' });
    const error = await transport.json('DELETE', '/missing').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'not_found', status: 404 });
    expect(seen).toEqual([
      { method: 'POST', type: 'application/json', body: '{"name":"a"}' },
      { method: 'GET', type: undefined, body: '' },
      { method: 'DELETE', type: undefined, body: '' },
    ]);
    expect(connections()).toBe(1); // fetch would have opened its own
  });

  it('sends nothing where a header would split the request, or the scheme is not http', async () => {
    let requests = 0;
    const { url } = await serve((_req, res) => (requests++, res.end('ok')));
    const direct = new DirectHttp();
    expect(await direct.request('GET', url, { authorization: 'Bearer x\r\nx-injected: 1' }, undefined, 10)).toBeUndefined();
    expect(await direct.request('GET', new URL(url.href.replace('http:', 'https:')), {}, undefined, 10)).toBeUndefined();
    expect(requests).toBe(0);
  });

  const refusals: [string, Buffer][] = [
    ['a chunked answer', Buffer.from('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n')],
    ['an unsized answer', Buffer.from('HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nok')],
    ['two lengths', Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok')],
    ['a length past the limit (never allocated)', Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 999999999999\r\n\r\nok')],
    ['more bytes than the length', Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA')],
    ['a head longer than 16 KiB', Buffer.from(`HTTP/1.1 200 OK\r\nx-long: ${'a'.repeat(20_000)}\r\ncontent-length: 2\r\n\r\nok`)],
  ];
  for (const [what, raw] of refusals) {
    it(`refuses ${what} with a TypeError`, async () => {
      const url = await rawServer(raw);
      await expect(new DirectHttp().request('GET', url, {}, undefined, 1024 * 1024)).rejects.toBeInstanceOf(TypeError);
    });
  }

  it('stops at an abort with its reason', async () => {
    // Sends the head and half the body, then nothing more.
    const url = await rawServer(Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n'), Buffer.alloc(50)]));
    const controller = new AbortController();
    const pending = new DirectHttp().request('GET', url, {}, undefined, 1024, controller.signal);
    setTimeout(() => controller.abort(new Error('enough')), 50);
    await expect(pending).rejects.toThrow('enough');
  });

  it('fails a request whose answer stops coming, as fetch does (undici\'s codes), and not a kept idle connection', async () => {
    const silent = await rawServer(Buffer.alloc(0));
    const halfBody = await rawServer(Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n'), Buffer.alloc(50)]));
    const direct = new DirectHttp(150);
    for (const [url, code] of [[silent, 'UND_ERR_HEADERS_TIMEOUT'], [halfBody, 'UND_ERR_BODY_TIMEOUT']] as const) {
      const error = await direct.request('GET', url, {}, undefined, 1024).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TypeError);
      expect(((error as TypeError).cause as { code?: string }).code).toBe(code);
    }
    // A slow answer that keeps coming within the bound is read; its kept connection then idles past it and still serves.
    const { url, connections } = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '4' });
      res.write('ab');
      setTimeout(() => res.end('cd'), 100);
    });
    expect((await direct.request('GET', url, {}, undefined, 10))!.body.toString()).toBe('abcd');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await direct.request('GET', url, {}, undefined, 10))!.body.toString()).toBe('abcd');
    expect(connections()).toBe(1);
  });

  it('the transport answers what direct requests refuse through fetch, the same bytes', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(200, { 'x-berth-version': 'v1' }); // no content-length: chunked
      res.end(BODY);
    });
    const answer = await new HttpTransport(url.origin, 'token').bytes('/file', {}, BODY.length);
    expect(answer.body.equals(BODY)).toBe(true);
    expect(answer.header('x-berth-version')).toBe('v1');
  });
});
