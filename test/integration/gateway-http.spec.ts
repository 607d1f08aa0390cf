/**
 * The gateway in this process over the real runtime, for what needs its internals: an unexpected runtime fault
 * becomes a logged generic 500 (injected: the one fault the real runtime cannot produce on demand), the body limit
 * with `detail.max_bytes`, runtime error codes, output paged by cursor, the OpenAPI document's structure, and logs
 * that never hold a token. Routes, scopes and fuzzing against a real `berth serve` are in test/e2e.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodySchema, executionRecordSchema } from '../../schemas/api.ts';
import { expectedOutput } from '../fixtures/emit-bytes.mjs';
import { createEnvironment, emit, startGateway, submit, tokens, type RunningGateway } from './gateway-fixture.ts';

let gw: RunningGateway;
let env: string;
let finished: { id: string };

beforeAll(async () => {
  gw = await startGateway();
  env = await createEnvironment(gw);
  finished = await submit(gw, env, emit(5000, 20));
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

describe('errors', () => {
  it('answers a body over the limit with body_too_large (413) naming max_bytes', async () => {
    const body = JSON.stringify({ name: 'a', description: 'y'.repeat(2 * 1024 * 1024) });
    const error = await expectError(await call('POST', '/v1/environments', { body }), 413, 'body_too_large');
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

describe('output over HTTP', () => {
  it('long-polls to the terminal record and pages output bytes by cursor with cursor headers', async () => {
    const record = await submit(gw, env, emit(300_000, 200));
    const done = executionRecordSchema.parse(await (await call('GET', `/v1/executions/${record.id}?waitMs=20000`)).json());
    expect(done).toMatchObject({ status: 'exited', exitCode: 0 });

    const parts: Buffer[] = [];
    let cursor = 0;
    for (;;) {
      const response = await call('GET', `/v1/executions/${record.id}/output?stream=stdout&cursor=${cursor}&maxBytes=65536`);
      expect(response.headers.get('content-type')).toBe('application/octet-stream');
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(bytes.length).toBeLessThanOrEqual(65536);
      parts.push(bytes);
      const next = Number(response.headers.get('x-berth-cursor'));
      expect(next).toBe(cursor + bytes.length);
      cursor = next;
      if (response.headers.get('x-berth-complete') === 'true') break;
    }
    expect(Buffer.concat(parts).equals(expectedOutput('stdout', 300_000))).toBe(true);
    const beyond = await call('GET', `/v1/executions/${record.id}/output?cursor=999999`);
    expect(beyond.headers.get('x-berth-complete')).toBe('true');
    expect((await beyond.arrayBuffer()).byteLength).toBe(0);
  });
});

describe('OpenAPI', () => {
  it('is a well-formed OpenAPI 3.1 document of every declared route with params, bodies and responses', async () => {
    const doc = (await (await call('GET', '/v1/openapi.json', { token: null })).json()) as {
      openapi: string;
      info: { title: string; version: string };
      paths: Record<string, Record<string, Record<string, unknown>>>;
      components: { schemas: Record<string, unknown>; securitySchemes: Record<string, unknown> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.title).toBe('Berth');
    const listed = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
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
