/**
 * A body over a limit gets its 413 in the error shape every time, from a real `berth serve`: JSON routes past the
 * 1 MiB body limit (body_too_large) and a file upload past BERTH_MAX_FILE_BYTES (file_too_large), with bodies of 2,
 * 16 and 64 MiB, sent by fetch and by node:http with and without a declared length, each writing its whole body
 * before it reads. A server that closed with the body unread made those writes fail (EPIPE, ECONNRESET) about one
 * time in three, and the client never saw the answer. A client that writes on past what the server will read and
 * drop (64 MiB) still gets its answer: the server ends its side and holds the connection a while before it closes,
 * where closing at once reset the connection under the client's writes and it saw EPIPE instead.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema } from '../../schemas/api.ts';
import { createEnvironment, startServer, tokens, type BerthServer } from './berth-server.ts';
import { postEndless } from './endless-body.ts';

const MiB = 1024 * 1024;
const SIZES = [2 * MiB, 16 * MiB, 64 * MiB];
const ROUNDS = 4;

let server: BerthServer;
let env: string;

beforeAll(async () => {
  server = await startServer([], { BERTH_MAX_FILE_BYTES: String(MiB) });
  env = await createEnvironment(server);
});
afterAll(() => server?.close());

interface Answer {
  status: number;
  text: string;
  connection: string | undefined;
}

/** A JSON document of exactly `size` bytes. */
const jsonOf = (size: number) => Buffer.concat([Buffer.from('{"name":"big","description":"'), Buffer.alloc(size - 32, 'y'), Buffer.from('"}')]);

async function viaFetch(method: string, path: string, body: Buffer, contentType: string): Promise<Answer> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${tokens.alice}`, 'content-type': contentType },
    body: body as BodyInit,
  });
  return { status: response.status, text: await response.text(), connection: response.headers.get('connection') ?? undefined };
}

/** node:http, the whole body written (in 1 MiB pieces when `chunked`, with no declared length) before reading. */
function viaHttp(method: string, path: string, body: Buffer, contentType: string, chunked: boolean): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { authorization: `Bearer ${tokens.alice}`, 'content-type': contentType };
    if (!chunked) headers['content-length'] = body.length;
    const req = http.request(`${server.url}${path}`, { method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(chunks).toString(), connection: res.headers.connection }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (!chunked) return void req.end(body);
    for (let at = 0; at < body.length; at += MiB) req.write(body.subarray(at, at + MiB));
    req.end();
  });
}

const clients = {
  fetch: (method: string, path: string, body: Buffer, type: string) => viaFetch(method, path, body, type),
  'node:http': (method: string, path: string, body: Buffer, type: string) => viaHttp(method, path, body, type, false),
  'node:http chunked': (method: string, path: string, body: Buffer, type: string) => viaHttp(method, path, body, type, true),
};

function expectRefusal(answer: Answer, code: string, label: string): void {
  expect(answer.status, `${label}: ${answer.text.slice(0, 200)}`).toBe(413);
  const { error } = errorBodySchema.parse(JSON.parse(answer.text));
  expect(error.code, label).toBe(code);
  expect(error.detail.max_bytes, label).toBe(MiB);
}

describe('oversize bodies', () => {
  it('are answered 413 in the error shape every time, whoever sends them and however large (up to 64 MiB)', { timeout: 300_000 }, async () => {
    const routes = [
      { method: 'POST', path: '/v1/environments', type: 'application/json', code: 'body_too_large', body: jsonOf },
      { method: 'POST', path: `/v1/environments/${env}/import`, type: 'application/json', code: 'body_too_large', body: jsonOf },
      { method: 'PUT', path: `/v1/environments/${env}/files/big.bin`, type: 'application/octet-stream', code: 'file_too_large', body: (n: number) => Buffer.alloc(n, 7) },
    ];
    const failures: string[] = [];
    for (const size of SIZES) {
      const bodies = new Map(routes.map((r) => [r, r.body(size)]));
      for (let round = 0; round < ROUNDS; round++) {
        for (const route of routes) {
          for (const [client, send] of Object.entries(clients)) {
            const label = `${client} ${route.method} ${route.path} ${size / MiB} MiB, round ${round}`;
            // Collected, not thrown at once: the count of failed sends is what tells a race from a plain refusal.
            const answer = await send(route.method, route.path, bodies.get(route)!, route.type).catch((e: Error & { cause?: { code?: string } }) => {
              failures.push(`${label}: ${e.cause?.code ?? (e as NodeJS.ErrnoException).code ?? e.message}`);
              return undefined;
            });
            if (answer) expectRefusal(answer, route.code, label);
          }
        }
      }
    }
    expect(failures).toEqual([]);
    expect((await server.json(`/v1/environments/${env}/files`)).entries).toEqual([]); // never written, not even in part
  });

  it('keeps the connection for the next request once the refused body was read to its end', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    const send = (body: Buffer) =>
      new Promise<Answer>((resolve, reject) => {
        const req = http.request(
          `${server.url}/v1/environments`,
          { method: 'POST', agent, headers: { authorization: `Bearer ${tokens.alice}`, 'content-type': 'application/json', 'content-length': body.length } },
          (res) => {
            sockets.add(res.socket);
            let text = '';
            res.on('data', (c) => (text += c));
            res.on('end', () => resolve({ status: res.statusCode!, text, connection: res.headers.connection }));
          },
        );
        req.on('error', reject);
        req.end(body);
      });
    try {
      const refused = await send(jsonOf(2 * MiB));
      expectRefusal(refused, 'body_too_large', 'first');
      expect(refused.connection).toBe('keep-alive');
      const created = await send(Buffer.from(JSON.stringify({ name: `after refusal ${Date.now()}` })));
      expect(created.status, created.text).toBe(201);
      expect(sockets.size).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it('answer a client that writes on past the 64 MiB the server reads and drops, then close', { timeout: 300_000 }, async () => {
    const piece = Buffer.alloc(MiB, 'y');
    const routes = [
      { path: '/v1/environments', type: 'application/json', code: 'body_too_large' },
      { path: `/v1/environments/${env}/files/big.bin`, type: 'application/octet-stream', code: 'file_too_large' },
    ];
    const failures: string[] = [];
    for (let round = 0; round < 16; round++) {
      for (const route of routes) {
        const label = `${route.path}, round ${round}`;
        const method = route.type === 'application/json' ? 'POST' : 'PUT';
        const answer = await postEndless(`${server.url}${route.path}`, tokens.alice, route.type, () => piece, 1024 * MiB, method).catch((e: NodeJS.ErrnoException) => {
          failures.push(`${label}: ${e.code ?? e.message}`);
          return undefined;
        });
        if (!answer) continue;
        expect(answer.status, `${label}: no answer after ${answer.sent} bytes`).toBe(413);
        expect(answer.body.error.code, label).toBe(route.code);
        expect(answer.connection, label).toBe('close');
        expect(answer.sent, label).toBeGreaterThan(64 * MiB);
      }
    }
    expect(failures).toEqual([]);
  });
});
