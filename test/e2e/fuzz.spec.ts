/**
 * Malformed and random requests against a real `berth serve` child: wrong types, huge strings, unknown fields, bad
 * ids, bad cursors, broken JSON, odd paths and headers. Every answer is a 4xx in the error shape — never a 500, never
 * a stack trace, never an echo of a huge input — and the server keeps serving (the process is alive and answers).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema } from '../../schemas/api.ts';
import { createEnvironment, finished, startServer, submit, type BerthServer } from './berth-server.ts';

let server: BerthServer;
let env: string;
let done: { id: string };

beforeAll(async () => {
  server = await startServer();
  env = await createEnvironment(server);
  done = await submit(server, env, ['echo', 'fuzz']);
  await finished(server, done.id);
});
afterAll(() => server?.close());

async function expect4xx(response: Response, label: string): Promise<void> {
  const text = await response.text();
  expect(response.status, `${label} -> ${text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
  expect(response.status, `${label} -> ${text.slice(0, 200)}`).toBeLessThan(500);
  const body = errorBodySchema.parse(JSON.parse(text));
  expect(body.error.code).toMatch(/^[a-z_]+$/);
  expect(text, label).not.toMatch(/\bat .*\.(ts|js):\d+/);
  expect(text.length, `${label}: an error never echoes a huge input`).toBeLessThan(5000);
}

async function stillServing(): Promise<void> {
  expect(server.process.child.exitCode).toBeNull();
  expect((await server.call('/healthz', { token: null })).status).toBe(200);
  expect((await server.call(`/v1/executions/${done.id}`)).status).toBe(200);
}

describe('fuzzed requests', () => {
  it('answer every hand-picked malformed request with a 4xx in the error shape', async () => {
    const huge = 'x'.repeat(200_000);
    const id = done.id;
    const cases: { method: string; path: string; body?: string; headers?: Record<string, string> }[] = [
      { method: 'POST', path: '/v1/environments', body: '{"name":' },
      { method: 'POST', path: '/v1/environments', body: '[]' },
      { method: 'POST', path: '/v1/environments', body: 'null' },
      { method: 'POST', path: '/v1/environments', body: '{"name": 42}' },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: huge }) },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: 'a', unknown: true }) },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: 'a', profile: { provider: 'vm' } }) },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: 'a', profile: { memoryMb: 'lots' } }) },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: '***' }) },
      { method: 'POST', path: '/v1/environments', body: '{"name":"a","__proto__":{"polluted":true}}' },
      { method: 'POST', path: '/v1/environments', body: 'name=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      { method: 'POST', path: '/v1/environments', body: '', headers: { 'content-type': 'application/json' } },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: 'a', description: 'y'.repeat(2 * 1024 * 1024) }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', command: ['true'] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, session: 's', command: ['x'] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'has space', environment: env, command: ['x'] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: [] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: [1, 2] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: [''] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: 'x', env: { 'BAD-NAME': 'v' } }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: 'x', env: { A: 'nul\u0000' } }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: 'x', pty: { cols: 0, rows: 1e9 } }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: 'x', timeoutMs: -5 }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: '../../etc', command: 'x' }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: 'henv_00000000000000000000000000000000', command: 'x' }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', session: 'hses_nope', command: 'x' }) },
      { method: 'GET', path: `/v1/executions/${'a'.repeat(2000)}` },
      { method: 'GET', path: '/v1/executions/bad%00id' },
      { method: 'GET', path: '/v1/executions/..%2F..%2Fetc' },
      { method: 'GET', path: '/v1/executions/%E0%A4%A' },
      { method: 'GET', path: '/v1/executions/hexe_00000000000000000000000000000000' },
      { method: 'GET', path: `/v1/executions/${id}?waitMs=-1` },
      { method: 'GET', path: `/v1/executions/${id}?waitMs=abc` },
      { method: 'GET', path: `/v1/executions/${id}?waitMs=1&waitMs=2` },
      { method: 'GET', path: `/v1/executions/${id}?unknown=1` },
      { method: 'GET', path: `/v1/executions/${id}/output?cursor=-1` },
      { method: 'GET', path: `/v1/executions/${id}/output?cursor=abc` },
      { method: 'GET', path: `/v1/executions/${id}/output?cursor=1e3` },
      { method: 'GET', path: `/v1/executions/${id}/output?cursor=` },
      { method: 'GET', path: `/v1/executions/${id}/output?cursor=99999999999999999999` },
      { method: 'GET', path: `/v1/executions/${id}/output?stream=stdin` },
      { method: 'GET', path: `/v1/executions/${id}/output?maxBytes=0` },
      { method: 'GET', path: `/v1/executions/${id}/events`, headers: { 'last-event-id': 'stdout:-1' } },
      { method: 'GET', path: `/v1/executions/${id}/events`, headers: { 'last-event-id': 'nonsense' } },
      { method: 'GET', path: `/v1/executions/${id}/events?stdout=x` },
      { method: 'GET', path: `/v1/executions/${id}/stream` },
      { method: 'GET', path: `/v1/executions/${id}/stream?stdout=-4` },
      { method: 'GET', path: '/v1/events', headers: { 'last-event-id': 'x' } },
      { method: 'GET', path: '/v1/events?after=-3' },
      { method: 'GET', path: '/v1/executions?status=sleeping' },
      { method: 'GET', path: '/v1/executions?environment=../x' },
      { method: 'GET', path: '/v1/streams/%20bad?at=1' },
      { method: 'GET', path: '/v1/streams/execution-x?at=last' },
      { method: 'GET', path: '/v1/streams/no-such-stream' },
      { method: 'POST', path: '/v1/sessions', body: JSON.stringify({ environmentId: 7 }) },
      { method: 'GET', path: '/v1/sessions/hses_missing' },
      { method: 'PUT', path: `/v1/environments/${env}`, body: JSON.stringify({ slug: 'renamed' }) },
      { method: 'PUT', path: `/v1/environments/${env}`, body: JSON.stringify({ profile: { provider: 'zone' } }) },
      { method: 'DELETE', path: `/v1/environments/${env}/allocations/halloc_nope` },
      { method: 'POST', path: '/v1/environments/henv_00000000000000000000000000000000/allocations' },
      { method: 'GET', path: '/v1/capabilities?token=whatever' },
      { method: 'DELETE', path: '/v1/capabilities' },
      { method: 'PATCH', path: `/v1/environments/${env}`, body: '{}' },
      { method: 'GET', path: '/v1/no/such/route' },
    ];
    for (const c of cases) await expect4xx(await server.call(c.path, { method: c.method, body: c.body, headers: c.headers }), `${c.method} ${c.path.slice(0, 80)}`);
    const head = await server.call('/v1/environments', { method: 'HEAD' });
    expect(head.status).toBe(404); // no implicit HEAD routes; a HEAD answer carries no body
    expect(Object.prototype).not.toHaveProperty('polluted');
    await stillServing();
  });

  it('survive seeded random bodies, queries and paths with 4xx answers only', async () => {
    let seed = 0x5eed;
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T,>(xs: T[]): T => xs[Math.floor(random() * xs.length)]!;
    const text = (max: number) =>
      Array.from({ length: Math.floor(random() * max) }, () =>
        String.fromCodePoint(pick([0, 9, 10, 34, 37, 47, 92, 0x7f, 0xe9, 0x1f600, 65 + Math.floor(random() * 58)])),
      ).join('');
    const keys = ['name', 'profile', 'provider', 'operationId', 'environment', 'environmentId', 'session', 'command', 'cwd', 'env', 'stdin', 'pty', 'cols', 'timeoutMs', 'target', 'x', '__proto__', 'constructor'];
    const value = (depth: number): unknown =>
      pick([
        () => null,
        () => random() < 0.5,
        () => Math.floor(random() * 2 ** 60) * (random() < 0.5 ? -1 : 1),
        () => random() * 1e308,
        () => text(20),
        () => 'z'.repeat(70_000),
        () => 'henv_00000000000000000000000000000000', // well-formed but absent: nothing random ever runs
        () => (depth > 2 ? [] : Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1))),
        () => (depth > 2 ? {} : Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [pick(keys), value(depth + 1)]))),
      ])();
    const posts = ['/v1/environments', '/v1/executions', '/v1/sessions', `/v1/environments/${env}`];
    const gets = ['/v1/executions', `/v1/executions/${done.id}`, `/v1/executions/${done.id}/output`, '/v1/streams/execution-x', '/v1/environments', '/v1/events'];
    for (let i = 0; i < 150; i++) {
      const path = pick(posts);
      const body = JSON.stringify(Object.fromEntries(Array.from({ length: 1 + Math.floor(random() * 5) }, () => [pick(keys), value(0)])));
      const response = await server.call(path, { method: path.includes('henv_') ? 'PUT' : 'POST', body });
      expect(response.status, `${path} ${body.slice(0, 200)}`).toBeLessThan(500);
      if (response.status >= 400) errorBodySchema.parse(await response.json());
      else await response.arrayBuffer();

      const query = Array.from({ length: 1 + Math.floor(random() * 3) }, () => {
        const key = pick(['cursor', 'stream', 'waitMs', 'status', 'operationId', 'at', 'after', text(5)]);
        return `${encodeURIComponent(key)}=${encodeURIComponent(text(12))}`;
      }).join('&');
      const target = pick(gets);
      const get = await server.call(`${target}?${query}`);
      expect(get.status, `${target}?${query}`).toBeLessThan(500);
      if (get.status >= 400) errorBodySchema.parse(await get.json());
      else await get.body?.cancel(); // the audit feed would go on streaming

      const id = encodeURIComponent(text(40));
      const byId = await server.call(`/v1/executions/${id}/${pick(['output', 'events', 'cancel', ''])}`);
      expect(byId.status, id).toBeLessThan(500);
      await byId.arrayBuffer();
    }
    await stillServing();
  });

  it('answer garbage on the wire with 400 and keep serving', async () => {
    const { hostname, port } = new URL(server.url);
    for (const raw of ['GET /v1/environments HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n', 'BLAH\r\n\r\n', '\u0000\u0001\u0002\r\n\r\n']) {
      const answer = await new Promise<string>((resolve) => {
        const socket = net.connect(Number(port), hostname, () => socket.end(raw));
        let text = '';
        socket.on('data', (d) => (text += d));
        socket.on('close', () => resolve(text));
        socket.on('error', () => resolve(text));
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400/);
    }
    await stillServing();
  });
});
