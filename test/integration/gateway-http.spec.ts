/**
 * The gateway's HTTP surface over a real listening server: one error shape for every malformed request (4xx, never
 * 500, and the server keeps answering), bearer auth and scopes, executions by HTTP, OpenAPI, and logs without tokens.
 * Runs over the in-test FakeRuntimeApi until the real runtime exists (see its header).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema, executionRecordSchema, environmentSchema, recordedEventJsonSchema } from '../../schemas/api.ts';
import { expectedOutput } from '../unit/gateway/fake-runtime-api.ts';
import { createEnvironment, startGateway, submit, tokens, type RunningGateway } from './gateway-fixture.ts';

let gw: RunningGateway;
let env: string;
let finished: { id: string };

beforeAll(async () => {
  gw = await startGateway();
  env = await createEnvironment(gw);
  finished = await submit(gw, env, ['emit', '5000', '20']);
});
afterAll(() => gw.close());

const call = (method: string, path: string, init: { body?: string; headers?: Record<string, string>; token?: string | null } = {}) =>
  fetch(`${gw.url}${path}`, {
    method,
    body: init.body,
    headers: {
      ...(init.token === null ? {} : gw.headers(init.token ?? tokens.alice)),
      ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...init.headers,
    },
  });

async function expectError(response: Response, status: number, code: string) {
  const text = await response.text();
  expect(response.status, text).toBe(status);
  const body = errorBodySchema.parse(JSON.parse(text));
  expect(body.error.code).toBe(code);
  expect(text).not.toMatch(/\bat .*\.(ts|js):\d+/); // never a stack trace
  return body.error;
}

describe('error shape', () => {
  it('answers every malformed request with a 4xx in the error shape and keeps serving', async () => {
    const huge = 'x'.repeat(200_000);
    const cases: { method: string; path: string; body?: string; headers?: Record<string, string> }[] = [
      { method: 'POST', path: '/v1/environments', body: '{"name":' },
      { method: 'POST', path: '/v1/environments', body: '[]' },
      { method: 'POST', path: '/v1/environments', body: 'null' },
      { method: 'POST', path: '/v1/environments', body: '{"name": 42}' },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: huge }) },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: 'a', unknown: true }) },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: 'a', profile: { provider: 'vm' } }) },
      { method: 'POST', path: '/v1/environments', body: JSON.stringify({ name: 'a', profile: { memoryMb: 'lots' } }) },
      { method: 'POST', path: '/v1/environments', body: '{"name":"a","__proto__":{"polluted":true}}' },
      { method: 'POST', path: '/v1/environments', body: 'name=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } },
      { method: 'POST', path: '/v1/environments', body: '', headers: { 'content-type': 'application/json' } },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', command: ['true'] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, session: 's', command: ['x'] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'has space', environment: env, command: ['x'] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: [] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: [1, 2] }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: 'x', env: { 'BAD-NAME': 'v' } }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: 'x', pty: { cols: 0, rows: 1e9 } }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: env, command: 'x', timeoutMs: -5 }) },
      { method: 'POST', path: '/v1/executions', body: JSON.stringify({ operationId: 'o', environment: '../../etc', command: 'x' }) },
      { method: 'GET', path: `/v1/executions/${'a'.repeat(2000)}` },
      { method: 'GET', path: '/v1/executions/bad%00id' },
      { method: 'GET', path: '/v1/executions/..%2F..%2Fetc' },
      { method: 'GET', path: '/v1/executions/%E0%A4%A' },
      { method: 'GET', path: `/v1/executions/${finished.id}?waitMs=-1` },
      { method: 'GET', path: `/v1/executions/${finished.id}?waitMs=abc` },
      { method: 'GET', path: `/v1/executions/${finished.id}?waitMs=1&waitMs=2` },
      { method: 'GET', path: `/v1/executions/${finished.id}?unknown=1` },
      { method: 'GET', path: `/v1/executions/${finished.id}/output?cursor=-1` },
      { method: 'GET', path: `/v1/executions/${finished.id}/output?cursor=abc` },
      { method: 'GET', path: `/v1/executions/${finished.id}/output?cursor=1e3` },
      { method: 'GET', path: `/v1/executions/${finished.id}/output?cursor=` },
      { method: 'GET', path: `/v1/executions/${finished.id}/output?cursor=99999999999999999999` },
      { method: 'GET', path: `/v1/executions/${finished.id}/output?stream=stdin` },
      { method: 'GET', path: `/v1/executions/${finished.id}/events`, headers: { 'last-event-id': 'stdout:-1' } },
      { method: 'GET', path: `/v1/executions/${finished.id}/events`, headers: { 'last-event-id': 'nonsense' } },
      { method: 'GET', path: '/v1/events', headers: { 'last-event-id': 'x' } },
      { method: 'GET', path: '/v1/events?after=-3' },
      { method: 'GET', path: '/v1/executions?status=sleeping' },
      { method: 'GET', path: '/v1/streams/%20bad?at=1' },
      { method: 'GET', path: '/v1/streams/execution-x?at=last' },
      { method: 'POST', path: '/v1/sessions', body: JSON.stringify({ environmentId: 7 }) },
      { method: 'PUT', path: `/v1/environments/${env}`, body: JSON.stringify({ slug: 'renamed' }) },
      { method: 'GET', path: `/v1/executions/${finished.id}/stream` },
      { method: 'GET', path: '/v1/capabilities?token=whatever' },
      { method: 'DELETE', path: '/v1/capabilities' },
      { method: 'GET', path: '/v1/no/such/route' },
    ];
    for (const c of cases) {
      const response = await call(c.method, c.path, { body: c.body, headers: c.headers });
      const text = await response.text();
      expect(response.status, `${c.method} ${c.path.slice(0, 80)} -> ${text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
      expect(response.status, `${c.method} ${c.path.slice(0, 80)}`).toBeLessThan(500);
      const body = errorBodySchema.parse(JSON.parse(text));
      expect(['invalid_request', 'not_found', 'environment_invalid']).toContain(body.error.code);
      expect(text.length, 'an error never echoes a huge input').toBeLessThan(5000);
    }
    expect((await call('GET', '/healthz')).status).toBe(200);
    expect(Object.prototype).not.toHaveProperty('polluted');
  });

  it('survives seeded random bodies, queries and paths with 4xx answers only', async () => {
    let seed = 0x5eed;
    const random = () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = <T>(xs: T[]): T => xs[Math.floor(random() * xs.length)]!;
    const text = (max: number) =>
      Array.from({ length: Math.floor(random() * max) }, () => String.fromCodePoint(pick([0, 9, 10, 34, 37, 47, 92, 0x7f, 0xe9, 0x1f600, 65 + Math.floor(random() * 58)]))).join('');
    const value = (depth: number): unknown =>
      pick([
        () => null,
        () => random() < 0.5,
        () => Math.floor(random() * 2 ** 60) * (random() < 0.5 ? -1 : 1),
        () => random() * 1e308,
        () => text(20),
        () => 'z'.repeat(70_000),
        () => (depth > 2 ? [] : Array.from({ length: Math.floor(random() * 4) }, () => value(depth + 1))),
        () => (depth > 2 ? {} : Object.fromEntries(Array.from({ length: Math.floor(random() * 4) }, () => [pick(keys), value(depth + 1)]))),
      ])();
    const keys = ['name', 'profile', 'provider', 'operationId', 'environment', 'session', 'command', 'cwd', 'env', 'stdin', 'pty', 'cols', 'timeoutMs', 'x', '__proto__', 'constructor'];
    const posts = ['/v1/environments', '/v1/executions', '/v1/sessions', `/v1/environments/${env}`];
    const gets = ['/v1/executions', `/v1/executions/${finished.id}`, `/v1/executions/${finished.id}/output`, '/v1/streams/execution-x', '/v1/environments'];
    for (let i = 0; i < 150; i++) {
      const path = pick(posts);
      const body = JSON.stringify(Object.fromEntries(Array.from({ length: 1 + Math.floor(random() * 5) }, () => [pick(keys), value(0)])));
      const response = await call(path.includes('henv_') ? 'PUT' : 'POST', path, { body });
      expect(response.status, `${path} ${body.slice(0, 200)}`).toBeLessThan(500);
      if (response.status >= 400) errorBodySchema.parse(await response.json());
      else await response.arrayBuffer();

      const query = Array.from({ length: Math.floor(random() * 3) }, () => `${encodeURIComponent(pick(['cursor', 'stream', 'waitMs', 'status', 'operationId', 'at', text(5)]))}=${encodeURIComponent(text(12))}`).join('&');
      const get = await call('GET', `${pick(gets)}?${query}`);
      expect(get.status, query).toBeLessThan(500);
      await get.arrayBuffer();

      const id = encodeURIComponent(text(40));
      const byId = await call('GET', `/v1/executions/${id}/output`);
      expect(byId.status, id).toBeLessThan(500);
      await byId.arrayBuffer();
    }
    expect((await call('GET', '/healthz')).status).toBe(200);
  });

  it('answers a body over the limit with invalid_request naming max_bytes', async () => {
    const body = JSON.stringify({ name: 'a', description: 'y'.repeat(2 * 1024 * 1024) });
    const error = await expectError(await call('POST', '/v1/environments', { body }), 400, 'invalid_request');
    expect(error.detail.max_bytes).toBe(1024 * 1024);
    expect((await call('GET', '/healthz')).status).toBe(200);
  });

  it('reports a runtime BerthError with its own code and status', async () => {
    await createEnvironment(gw, tokens.alice, 'Twin Name');
    const error = await expectError(
      await call('POST', '/v1/environments', { body: JSON.stringify({ name: 'twin name' }) }),
      409,
      'environment_exists',
    );
    expect(error.detail.slug).toBe('twin-name');
    await expectError(await call('POST', '/v1/environments', { body: JSON.stringify({ name: '***' }) }), 400, 'environment_invalid');
  });

  it('turns an unexpected fault into a generic 500 internal and goes on serving', async () => {
    gw.api.failNext('createEnvironment', new Error('disk exploded at /var/secret/path'));
    const response = await call('POST', '/v1/environments', { body: JSON.stringify({ name: 'fine' }) });
    const text = await response.text();
    expect(response.status).toBe(500);
    const body = errorBodySchema.parse(JSON.parse(text));
    expect(body.error.code).toBe('internal');
    expect(text).not.toContain('/var/secret/path');
    expect(gw.logs.join('')).toContain('disk exploded'); // logged for the operator
    expect((await call('POST', '/v1/environments', { body: JSON.stringify({ name: 'fine' }) })).status).toBe(201);
  });
});

describe('auth and scopes', () => {
  it('requires a known bearer token everywhere except /healthz and the OpenAPI document', async () => {
    await expectError(await call('GET', '/v1/environments', { token: null }), 401, 'unauthorized');
    const unknown = await call('GET', '/v1/environments', { token: 'not-a-real-token-at-all' });
    expect(unknown.headers.get('www-authenticate')).toBe('Bearer');
    await expectError(unknown, 401, 'unauthorized');
    await expectError(await call('GET', '/metrics', { token: null }), 401, 'unauthorized');
    await expectError(await call('GET', '/v1/environments', { token: null, headers: { authorization: 'Basic Zm9vOmJhcg==' } }), 401, 'unauthorized');
    expect((await call('GET', '/healthz', { token: null })).status).toBe(200);
    expect((await call('GET', '/v1/openapi.json', { token: null })).status).toBe(200);
    const metrics = await call('GET', '/metrics', { token: tokens.admin });
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await metrics.text()).toMatch(/^berth_executions \d+$/m);
  });

  it("hides another scope's resources as not found", async () => {
    await expectError(await call('GET', `/v1/environments/${env}`, { token: tokens.bob }), 404, 'environment_not_found');
    await expectError(await call('GET', `/v1/executions/${finished.id}`, { token: tokens.bob }), 404, 'not_found');
    await expectError(await call('GET', `/v1/executions/${finished.id}/output`, { token: tokens.bob }), 404, 'not_found');
    await expectError(await call('GET', `/v1/executions/${finished.id}/events`, { token: tokens.bob }), 404, 'not_found');
    await expectError(await call('POST', `/v1/executions/${finished.id}/cancel`, { token: tokens.bob }), 404, 'not_found');
    await expectError(await call('GET', `/v1/streams/execution-${finished.id}`, { token: tokens.bob }), 404, 'not_found');
    const bobs = await call('GET', '/v1/environments', { token: tokens.bob });
    expect(await bobs.json()).toEqual([]);
    const submitted = await call('POST', '/v1/executions', {
      token: tokens.bob,
      body: JSON.stringify({ operationId: 'bob-1', environment: env, command: ['x'] }),
    });
    await expectError(submitted, 404, 'environment_not_found');
  });
});

describe('executions over HTTP', () => {
  it('submits idempotently per operationId and refuses the same id with another input', async () => {
    const body = { operationId: 'idem-1', environment: env, command: ['emit', '100', '10'] };
    const first = executionRecordSchema.parse(await (await call('POST', '/v1/executions', { body: JSON.stringify(body) })).json());
    const again = executionRecordSchema.parse(await (await call('POST', '/v1/executions', { body: JSON.stringify(body) })).json());
    expect(again.id).toBe(first.id);
    const listed = await (await call('GET', '/v1/executions?operationId=idem-1')).json();
    expect(listed).toHaveLength(1);
    await expectError(
      await call('POST', '/v1/executions', { body: JSON.stringify({ ...body, command: ['other'] }) }),
      409,
      'operation_conflict',
    );
  });

  it('long-polls to the terminal record and serves output bytes by cursor with cursor headers', async () => {
    const record = await submit(gw, env, ['emit', '300000', '200']);
    const started = Date.now();
    const done = executionRecordSchema.parse(await (await call('GET', `/v1/executions/${record.id}?waitMs=5000`)).json());
    expect(done.status).toBe('exited');
    expect(Date.now() - started).toBeLessThan(4000);

    const parts: Buffer[] = [];
    let cursor = 0;
    for (;;) {
      const response = await call('GET', `/v1/executions/${record.id}/output?stream=stdout&cursor=${cursor}&maxBytes=65536`);
      expect(response.headers.get('content-type')).toBe('application/octet-stream');
      const bytes = Buffer.from(await response.arrayBuffer());
      parts.push(bytes);
      const next = Number(response.headers.get('x-berth-cursor'));
      expect(next).toBe(cursor + bytes.length);
      cursor = next;
      if (response.headers.get('x-berth-complete') === 'true') break;
    }
    expect(Buffer.concat(parts).equals(expectedOutput('stdout', 300000))).toBe(true);
  });

  it('returns the record at once when waitMs is absent, and cancels', async () => {
    const record = await submit(gw, env, ['emit', '1000', '5000']);
    const now = executionRecordSchema.parse(await (await call('GET', `/v1/executions/${record.id}`)).json());
    expect(['accepted', 'running']).toContain(now.status);
    const cancelled = executionRecordSchema.parse(await (await call('POST', `/v1/executions/${record.id}/cancel`)).json());
    expect(cancelled.status).toBe('cancelled');
    const byStatus = (await (await call('GET', '/v1/executions?status=cancelled')).json()) as { id: string }[];
    expect(byStatus.map((r) => r.id)).toContain(record.id);
  });

  it('serves environments, allocations, sessions, catalog and replay with their documented shapes', async () => {
    const environment = environmentSchema.parse(await (await call('GET', `/v1/environments/${env}`)).json());
    expect(environment.profile.provider).toBe('native');
    const acquired = await call('POST', `/v1/environments/${env}/allocations`);
    expect(acquired.status).toBe(201);
    const allocation = (await acquired.json()) as { allocationId: string };
    expect(((await (await call('GET', '/v1/allocations')).json()) as unknown[]).length).toBe(1);
    const released = await call('DELETE', `/v1/environments/${env}/allocations/${allocation.allocationId}`);
    expect(((await released.json()) as { state: string }).state).toBe('released');
    const session = await call('POST', '/v1/sessions', { body: JSON.stringify({ environmentId: env }) });
    expect(session.status).toBe(201);
    const sessionId = ((await session.json()) as { id: string }).id;
    expect((await call('GET', `/v1/sessions/${sessionId}`)).status).toBe(200);
    expect(((await (await call('GET', '/v1/catalog')).json()) as unknown[]).length).toBeGreaterThan(0);

    const replay = (await (await call('GET', `/v1/streams/execution-${finished.id}?at=1`)).json()) as {
      event: unknown;
      stateAfter: unknown;
    }[];
    expect(replay).toHaveLength(2);
    const event = recordedEventJsonSchema.parse(replay[1]!.event);
    expect(event.revision).toBe('1'); // bigints travel as decimal strings
    const deleted = await call('DELETE', `/v1/environments/${await createEnvironment(gw)}`);
    expect(deleted.status).toBe(204);
  });
});

describe('OpenAPI', () => {
  it('is a well-formed OpenAPI 3.1 document listing every route with params, bodies and responses', async () => {
    const doc = (await (await call('GET', '/v1/openapi.json', { token: null })).json()) as {
      openapi: string;
      info: { title: string; version: string };
      paths: Record<string, Record<string, Record<string, unknown>>>;
      components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.title).toBe('Berth');
    const expected = [
      'get /healthz', 'get /metrics', 'get /v1/capabilities', 'get /v1/openapi.json',
      'post /v1/environments', 'get /v1/environments', 'get /v1/environments/{id}', 'put /v1/environments/{id}',
      'delete /v1/environments/{id}', 'post /v1/environments/{id}/allocations', 'get /v1/environments/{id}/allocations',
      'delete /v1/environments/{id}/allocations/{allocationId}', 'get /v1/allocations', 'post /v1/sessions',
      'get /v1/sessions/{id}', 'post /v1/executions', 'get /v1/executions', 'get /v1/executions/{id}',
      'post /v1/executions/{id}/cancel', 'get /v1/executions/{id}/output', 'get /v1/executions/{id}/events',
      'get /v1/executions/{id}/stream', 'get /v1/activity', 'get /v1/catalog', 'get /v1/streams/{stream}', 'get /v1/events',
    ];
    const listed = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    expect(listed.sort()).toEqual([...expected].sort());
    expect(listed).toHaveLength(gw.gateway.routes.length);

    const operationIds = new Set<string>();
    const text = JSON.stringify(doc);
    for (const ref of text.matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)) expect(doc.components.schemas).toHaveProperty(ref[1]!);
    for (const [path, operations] of Object.entries(doc.paths)) {
      const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      for (const [method, op] of Object.entries(operations)) {
        expect(['get', 'post', 'put', 'delete']).toContain(method);
        expect(typeof op.summary).toBe('string');
        expect(operationIds.has(op.operationId as string)).toBe(false);
        operationIds.add(op.operationId as string);
        const parameters = (op.parameters ?? []) as { name: string; in: string; required: boolean; schema: object }[];
        const pathParams = parameters.filter((p) => p.in === 'path');
        expect(pathParams.map((p) => p.name).sort()).toEqual([...templated].sort());
        for (const p of parameters) {
          expect(['path', 'query', 'header']).toContain(p.in);
          expect(typeof p.schema).toBe('object');
          if (p.in === 'path') expect(p.required).toBe(true);
        }
        const responses = op.responses as Record<string, { description: string }>;
        expect(Object.keys(responses).some((s) => /^(2\d\d|101)$/.test(s))).toBe(true);
        for (const r of Object.values(responses)) expect(typeof r.description).toBe('string');
        if (method === 'post' && ['/v1/environments', '/v1/executions', '/v1/sessions'].includes(path)) {
          const body = op.requestBody as { content: Record<string, { schema: { type: string; additionalProperties: boolean } }> };
          expect(body.content['application/json']!.schema.additionalProperties).toBe(false); // strict bodies
        }
      }
    }
    const output = doc.paths['/v1/executions/{id}/output']!.get!;
    expect((output.parameters as { name: string }[]).map((p) => p.name)).toEqual(expect.arrayContaining(['stream', 'cursor']));
    expect(doc.paths['/healthz']!.get!.security).toEqual([]);
    const stream = doc.paths['/v1/executions/{id}/stream']!.get! as { 'x-websocket-messages': { server: object; client: object } };
    expect(JSON.stringify(stream['x-websocket-messages'].client)).toContain('resize');
    expect(JSON.stringify(stream['x-websocket-messages'].server)).toContain('status');
  });
});

describe('logs', () => {
  it('never contain a token, from headers, query parameters or refused attempts', async () => {
    await call('GET', '/v1/environments');
    await call('GET', '/v1/environments', { token: 'wrong-token-that-must-not-leak' });
    const sse = await fetch(`${gw.url}/v1/executions/${finished.id}/events?token=${tokens.bob}`);
    await sse.text();
    const viaQuery = await fetch(`${gw.url}/v1/executions/${finished.id}/events?stream=stdout&token=${tokens.alice}`);
    expect(viaQuery.status).toBe(200);
    await viaQuery.text();
    const all = gw.logs.join('');
    expect(all).toContain('"url":"/v1/executions/');
    expect(all).toContain('token=[redacted]');
    for (const secret of [tokens.alice, tokens.bob, 'wrong-token-that-must-not-leak']) expect(all).not.toContain(secret);
  });
});
