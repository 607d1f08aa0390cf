/**
 * Seed 001 §5 end to end against a real `berth serve`: harnesses naming an environment of the caller's scope, the
 * harnesses of one environment, executions through a harness, and a harness that outlives its environment.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { craftTar } from '../unit/content/crafted-tar.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';
import { answer, build, createNamed, expectError, putFile, run, send } from './content-client.ts';
import { OpenApiCheck, type OpenApiDocument } from './openapi-check.ts';

let server: BerthServer;
let openapi: OpenApiCheck;
beforeAll(async () => {
  server = await startServer();
  openapi = new OpenApiCheck(await server.json<OpenApiDocument>('/v1/openapi.json', { token: null }));
});
afterAll(() => server?.close());

const json = { 'content-type': 'application/json' };
const post = (path: string, body: unknown, token = tokens.alice) => send(server, 'POST', path, JSON.stringify(body), json, token);

describe('harnesses (seed 001 §5)', () => {
  it('should create, list, read, update and delete a harness naming an environment of the scope', async () => {
    const env = await createNamed(server, 'Teaser Env');
    const harness = await server.json('/v1/harnesses', { body: { name: 'Teaser cutter', base: 'codex', environment: env.id } });
    expect(harness).toMatchObject({ object: 'harness', name: 'Teaser cutter', base: 'codex', environment: env.id });
    expect(harness.id).toMatch(/^hhrn_[0-9a-f]{32}$/);
    expect((await server.json('/v1/harnesses')).map((h: { id: string }) => h.id)).toContain(harness.id);
    expect(await server.json(`/v1/harnesses/${harness.id}`)).toEqual(harness);
    expect((await server.json(`/v1/environments/${env.id}/harnesses`)).map((h: { id: string }) => h.id)).toEqual([harness.id]);

    const renamed = await server.json(`/v1/harnesses/${harness.id}`, { method: 'PUT', body: { name: 'Cutter', base: null } });
    expect(renamed).toMatchObject({ name: 'Cutter', base: null, environment: env.id });
    const detached = await server.json(`/v1/harnesses/${harness.id}`, { method: 'PUT', body: { environment: null } });
    expect(detached.environment).toBeNull();
    expect(await server.json(`/v1/environments/${env.id}/harnesses`)).toEqual([]);

    expect((await send(server, 'DELETE', `/v1/harnesses/${harness.id}`)).status).toBe(204);
    await expectError(send(server, 'GET', `/v1/harnesses/${harness.id}`), 404, 'not_found');
  });

  it('should refuse a harness write naming an environment outside the scope, or none that exists, with environment_not_found', async () => {
    const bobs = await createNamed(server, 'Bob Env', tokens.bob);
    await expectError(post('/v1/harnesses', { name: 'h', environment: bobs.id }), 404, 'environment_not_found');
    await expectError(post('/v1/harnesses', { name: 'h', environment: `henv_${'1'.repeat(32)}` }), 404, 'environment_not_found');
    const own = await server.json('/v1/harnesses', { body: { name: 'h' } });
    await expectError(send(server, 'PUT', `/v1/harnesses/${own.id}`, JSON.stringify({ environment: bobs.id }), json), 404, 'environment_not_found');
    // Another scope sees neither the harness nor its list.
    await expectError(send(server, 'GET', `/v1/harnesses/${own.id}`, undefined, {}, tokens.bob), 404, 'not_found');
    expect((await server.json('/v1/harnesses', { token: tokens.bob })).map((h: { id: string }) => h.id)).not.toContain(own.id);
    await expectError(send(server, 'GET', `/v1/environments/${bobs.id}/harnesses`), 404, 'environment_not_found');
  });

  it("should run an execution in the harness's environment, and in the task's own environment when it names one", async () => {
    const env = await createNamed(server, 'Harness Project');
    await putFile(server, env.id, 'who.txt', 'harness env');
    await build(server, env.id);
    const other = await createNamed(server, 'Task Override');
    const harness = await server.json('/v1/harnesses', { body: { name: 'runner', environment: env.id } });
    const viaHarness = await run(server, '', 'cat /env/harness-project/who.txt', tokens.alice, { environment: undefined, harness: harness.id });
    expect(viaHarness.record).toMatchObject({ environment: env.id, version: 1, status: 'exited' });
    expect(viaHarness.stdout).toBe('harness env');
    const overridden = await run(server, other.id, 'echo own', tokens.alice, { harness: harness.id });
    expect(overridden.record.environment).toBe(other.id);
  });

  it('should keep the reference after the environment is deleted and refuse the next execution with environment_not_found', async () => {
    const env = await createNamed(server, 'Doomed Env');
    const harness = await server.json('/v1/harnesses', { body: { name: 'orphan', environment: env.id } });
    expect((await send(server, 'DELETE', `/v1/environments/${env.id}`)).status).toBe(204);
    expect((await server.json(`/v1/harnesses/${harness.id}`)).environment).toBe(env.id);
    const body = { operationId: `orphan-${Date.now()}`, harness: harness.id, command: 'true' };
    await expectError(post('/v1/executions', body), 404, 'environment_not_found');
    expect(await server.json(`/v1/executions?operationId=${body.operationId}`)).toEqual([]);
  });
});

describe('the content chapter in its documented shapes', () => {
  it('should answer every content endpoint with the shape its OpenAPI document gives', async () => {
    const env = await createNamed(server, 'Documented Shapes');
    const e = `/v1/environments/${env.id}`;
    const check = async (method: string, template: string, path: string, status: number, body?: string, headers: Record<string, string> = {}) => {
      const got = await answer(await send(server, method, path, body, headers));
      expect(got.status, `${method} ${path}: ${JSON.stringify(got.body).slice(0, 300)}`).toBe(status);
      if (status !== 204) openapi.expect(method, template, status, got.body);
      return got.body;
    };
    const json = { 'content-type': 'application/json' };
    await check('PUT', '/v1/environments/{id}/files/{path}', `${e}/files/setup.sh`, 200, 'echo ok\n');
    await check('POST', '/v1/environments/{id}/directories', `${e}/directories`, 201, '{"path":"d"}', json);
    await check('POST', '/v1/environments/{id}/import', `${e}/import`, 200, craftTar([{ name: 'a.txt', content: Buffer.from('a') }]) as unknown as string);
    await check('GET', '/v1/environments/{id}/files', `${e}/files`, 200);
    await check('DELETE', '/v1/environments/{id}/files/{path}', `${e}/files/d`, 204);
    const started = await check('POST', '/v1/environments/{id}/build', `${e}/build`, 202);
    for (;;) {
      const record = await check('GET', '/v1/environments/{id}/builds/{version}', `${e}/builds/${started.version}`, 200);
      if (record.status !== 'building') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await check('GET', '/v1/environments/{id}/versions', `${e}/versions`, 200);
    await check('POST', '/v1/environments/{id}/versions/{version}/activate', `${e}/versions/1/activate`, 200);
    const harness = await check('POST', '/v1/harnesses', '/v1/harnesses', 201, JSON.stringify({ name: 'shaped', environment: env.id }), json);
    await check('GET', '/v1/harnesses', '/v1/harnesses', 200);
    await check('GET', '/v1/harnesses/{id}', `/v1/harnesses/${harness.id}`, 200);
    await check('PUT', '/v1/harnesses/{id}', `/v1/harnesses/${harness.id}`, 200, '{"name":"reshaped"}', json);
    await check('GET', '/v1/environments/{id}/harnesses', `${e}/harnesses`, 200);
    await check('DELETE', '/v1/harnesses/{id}', `/v1/harnesses/${harness.id}`, 204);
    openapi.expect('GET', '/v1/environments/{id}', 200, await server.json(e));
  });
});
