/**
 * Names wherever an environment id is (issue 18), against a hostile member token (DESIGN §13), through the real
 * gateway over the real runtime (native): every environment route, the executions submit and list, sessions and lease
 * binds take the environment's name as well as its id; bob naming alice's environment gets exactly the answer a name
 * nobody has gets (so he cannot tell it exists), and never reaches it by its name through any route.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus } from '../integration/workspace-http.ts';

let gw: RunningGateway;
let aliceEnv: { id: string; name: string; slug: string };

beforeAll(async () => {
  gw = await startGateway();
  aliceEnv = await expectStatus(call(gw, 'POST', '/v1/environments', { json: { name: 'Alice Build Box' } }), 201);
});
afterAll(async () => {
  await gw?.close();
});

const byName = encodeURIComponent('Alice Build Box');

describe('environment names in the caller\'s scope', () => {
  it('should answer the environment by its name and by its slug on the environment routes', async () => {
    expect(await expectStatus(call(gw, 'GET', `/v1/environments/${byName}`), 200)).toMatchObject({ id: aliceEnv.id });
    expect(await expectStatus(call(gw, 'GET', `/v1/environments/${aliceEnv.slug}`), 200)).toMatchObject({ id: aliceEnv.id });
    const renamed = await expectStatus(call(gw, 'PUT', `/v1/environments/${aliceEnv.slug}`, { json: { description: 'by slug' } }), 200);
    expect(renamed).toMatchObject({ id: aliceEnv.id, description: 'by slug' });
    expect(await expectStatus(call(gw, 'GET', `/v1/environments/${byName}/allocations`), 200)).toEqual([]);
    expect(await expectStatus(call(gw, 'GET', `/v1/environments/${byName}/versions`), 200)).toMatchObject({ environment: aliceEnv.id });
  });

  it('should run a command named by environment name, list its executions by that name, and bind a session and a lease to it', async () => {
    const record = await expectStatus(call(gw, 'POST', '/v1/executions', { json: { operationId: 'by-name-1', environment: 'Alice Build Box', command: ['true'] } }), 201);
    expect(record.environment).toBe(aliceEnv.id);
    const listed = await expectStatus(call(gw, 'GET', `/v1/executions?environment=${aliceEnv.slug}`), 200);
    expect(listed.map((r: { id: string }) => r.id)).toContain(record.id);
    const session = await expectStatus(call(gw, 'POST', '/v1/sessions', { json: { environmentId: aliceEnv.slug } }), 201);
    expect(session.environmentId).toBe(aliceEnv.id);
    const lease = await expectStatus(call(gw, 'POST', '/v1/leases', { json: { key: 'by-name', work: { kind: 'w', id: '1' }, environmentId: 'Alice Build Box' } }), 201);
    expect(lease.key).toBe('by-name');
  });
});

describe("another tenant's environment by name", () => {
  const bob = { token: tokens.bob };

  it('should answer bob environment_not_found for alice\'s name exactly as for a name nobody has', async () => {
    const foreign = await expectError(call(gw, 'GET', `/v1/environments/${byName}`, bob), 404, 'environment_not_found');
    const nobody = await expectError(call(gw, 'GET', `/v1/environments/${encodeURIComponent('Nobody Has This')}`, bob), 404, 'environment_not_found');
    expect(foreign).toEqual({ ...nobody, message: nobody.message.replace('Nobody Has This', 'Alice Build Box'), detail: { name: 'Alice Build Box' } });
    expect(JSON.stringify(foreign)).not.toContain(aliceEnv.id);
  });

  it('should never reach alice\'s environment by name through any route bob can call', async () => {
    const tries: [string, string, unknown?][] = [
      ['GET', `/v1/environments/${aliceEnv.slug}`],
      ['PUT', `/v1/environments/${aliceEnv.slug}`, { description: 'bob was here' }],
      ['DELETE', `/v1/environments/${aliceEnv.slug}`],
      ['POST', `/v1/environments/${aliceEnv.slug}/allocations`],
      ['GET', `/v1/environments/${aliceEnv.slug}/allocations`],
      ['GET', `/v1/environments/${aliceEnv.slug}/files`],
      ['POST', `/v1/environments/${aliceEnv.slug}/build`],
      ['POST', '/v1/executions', { operationId: 'bob-by-name', environment: aliceEnv.slug, command: ['true'] }],
      ['POST', '/v1/sessions', { environmentId: 'Alice Build Box' }],
      ['POST', '/v1/leases', { key: 'bob-by-name', work: { kind: 'w', id: '1' }, environmentId: aliceEnv.slug }],
    ];
    for (const [method, path, json] of tries) {
      const error = await expectError(call(gw, method, path, { ...bob, ...(json !== undefined ? { json } : {}) }), 404, 'environment_not_found');
      expect(JSON.stringify(error)).not.toContain(aliceEnv.id);
    }
    // A filter by a name unknown in bob's scope is not found, whoever has it; by alice's id it matches nothing of his.
    await expectError(call(gw, 'GET', `/v1/executions?environment=${aliceEnv.slug}`, bob), 404, 'environment_not_found');
    expect(await expectStatus(call(gw, 'GET', `/v1/executions?environment=${aliceEnv.id}`, bob), 200)).toEqual([]);
    // Alice's environment is untouched by every try.
    expect(await expectStatus(call(gw, 'GET', `/v1/environments/${aliceEnv.id}`), 200)).toMatchObject({ description: 'by slug' });
  });

  it('should answer a long name or one with control characters as a typed error, never a server error', async () => {
    await expectError(call(gw, 'GET', `/v1/environments/${'x'.repeat(200)}`, bob), 404, 'environment_not_found');
    await expectError(call(gw, 'GET', `/v1/environments/${'x'.repeat(4000)}`, bob), 400, 'invalid_request');
    await expectError(call(gw, 'POST', '/v1/executions', { ...bob, json: { operationId: 'ctl', environment: 'a\u0000b', command: ['true'] } }), 404, 'environment_not_found');
  });
});

describe('the client takes names wherever an id is', () => {
  it('should get, run in and list executions of an environment by name through the low-level client', async () => {
    const { Berth } = await import('../../src/client/index.ts');
    const berth = await Berth.connect({ url: gw.url, token: tokens.alice });
    expect((await berth.environments.get('Alice Build Box')).id).toBe(aliceEnv.id);
    const record = await berth.executions.run('Alice Build Box', ['true']);
    expect(record).toMatchObject({ environment: aliceEnv.id, exitCode: 0 });
    expect((await berth.executions.list({ environment: aliceEnv.slug })).map((r) => r.id)).toContain(record.id);
    const bobs = await Berth.connect({ url: gw.url, token: tokens.bob });
    await expect(bobs.environments.get('Alice Build Box')).rejects.toMatchObject({ code: 'environment_not_found', status: 404 });
  });
});

describe('the OpenAPI document', () => {
  it('documents the environment references as ids or names, without the id pattern a name would break', async () => {
    const doc = await expectStatus(call(gw, 'GET', '/v1/openapi.json'), 200);
    const id = doc.paths['/v1/environments/{id}/files'].get.parameters.find((p: { name: string }) => p.name === 'id');
    expect(id).toMatchObject({ in: 'path', schema: { type: 'string', minLength: 1 } });
    expect(id.schema.pattern).toBeUndefined();
    expect(id.description).toMatch(/name or slug/);
    expect(doc.paths['/v1/executions'].get.parameters.find((p: { name: string }) => p.name === 'environment').description).toMatch(/name or slug/);
    expect(doc.paths['/v1/leases'].post.description).toMatch(/`environmentId`: The environment's id, or its name or slug/);
  });
});
