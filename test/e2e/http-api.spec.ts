/**
 * The HTTP API of a real `berth serve` child over the real runtime: every route of DESIGN §8 this issue covers
 * answers with the shape its own OpenAPI document gives (checked with a JSON Schema validator), native and Docker;
 * no token is 401 and another tenant's resources are 404 for reading, running and cancelling.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerAvailable } from '../integration/docker-env.ts';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from './berth-server.ts';
import { OpenApiCheck, type OpenApiDocument } from './openapi-check.ts';

let server: BerthServer;
let openapi: OpenApiCheck;

beforeAll(async () => {
  server = await startServer();
  openapi = new OpenApiCheck(await server.json<OpenApiDocument>('/v1/openapi.json', { token: null }));
});
afterAll(() => server?.close());

/** Calls a route and checks the answer against the document: status, then body schema. */
async function documented<T = any>(
  method: string,
  template: string,
  path: string,
  status: number,
  init: { body?: unknown; token?: string | null } = {},
): Promise<T> {
  const response = await server.call(path, { method, ...init });
  const text = await response.text();
  expect(response.status, `${method} ${path}: ${text.slice(0, 300)}`).toBe(status);
  const body = text === '' ? undefined : JSON.parse(text);
  if (status !== 204) openapi.expect(method, template, status, body);
  return body as T;
}

describe('OpenAPI', () => {
  it('lists every route of the issue and every schema in it compiles as JSON Schema 2020-12', () => {
    const listed = Object.entries(openapi.doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m} ${path}`));
    expect(listed.sort()).toEqual(
      [
        'get /healthz', 'get /metrics', 'get /v1/capabilities', 'get /v1/openapi.json',
        'post /v1/environments', 'get /v1/environments', 'get /v1/environments/{id}', 'put /v1/environments/{id}',
        'delete /v1/environments/{id}', 'post /v1/environments/{id}/allocations', 'get /v1/environments/{id}/allocations',
        'delete /v1/environments/{id}/allocations/{allocationId}', 'get /v1/allocations', 'post /v1/sessions',
        'get /v1/sessions/{id}', 'post /v1/executions', 'get /v1/executions', 'get /v1/executions/{id}',
        'post /v1/executions/{id}/cancel', 'get /v1/executions/{id}/output', 'get /v1/executions/{id}/events',
        'get /v1/executions/{id}/stream', 'get /v1/activity', 'get /v1/catalog', 'get /v1/streams/{stream}', 'get /v1/events',
        // The Environments content chapter (issue 6; test/e2e/content-*.spec.ts).
        'get /v1/environments/{id}/files', 'get /v1/environments/{id}/files/{path}', 'put /v1/environments/{id}/files/{path}',
        'delete /v1/environments/{id}/files/{path}', 'post /v1/environments/{id}/directories', 'post /v1/environments/{id}/import',
        'post /v1/environments/{id}/build', 'get /v1/environments/{id}/builds/{version}', 'get /v1/environments/{id}/versions',
        'post /v1/environments/{id}/versions/{version}/activate', 'get /v1/environments/{id}/harnesses', 'post /v1/harnesses',
        'get /v1/harnesses', 'get /v1/harnesses/{id}', 'put /v1/harnesses/{id}', 'delete /v1/harnesses/{id}',
        // Retention (issue 12): the admin's pass on demand.
        'post /v1/retention/run',
        // Workspaces and tool turns (issue 13; test/integration/gateway-workspaces.spec.ts).
        'delete /v1/sessions/{id}', 'post /v1/workspaces', 'get /v1/workspaces', 'get /v1/workspaces/{id}', 'delete /v1/workspaces/{id}',
        'get /v1/workspaces/{id}/history', 'post /v1/workspaces/{id}/holder/clear', 'post /v1/sessions/{id}/turns',
        'get /v1/sessions/{id}/turns/{turnId}', 'post /v1/sessions/{id}/turns/{turnId}/release',
        'get /v1/sessions/{id}/turns/{turnId}/files', 'put /v1/sessions/{id}/turns/{turnId}/files',
        'delete /v1/sessions/{id}/turns/{turnId}/files', 'get /v1/sessions/{id}/turns/{turnId}/files/list',
        'get /v1/sessions/{id}/turns/{turnId}/files/stat', 'post /v1/sessions/{id}/turns/{turnId}/files/edit',
        'post /v1/sessions/{id}/turns/{turnId}/files/mkdir', 'put /v1/sessions/{id}/turns/{turnId}/files/inputs',
        // Checkpoints and views (issue 14; test/integration/gateway-checkpoints.spec.ts).
        'get /v1/workspaces/{id}/checkpoints', 'get /v1/workspaces/{id}/checkpoints/{checkpointId}', 'get /v1/workspaces/{id}/diff',
        'get /v1/workspaces/{id}/mount', 'post /v1/workspaces/{id}/detach', 'post /v1/sessions/{id}/turns/{turnId}/checkpoints',
        'post /v1/sessions/{id}/turns/{turnId}/restore',
        // Leases (issue 15; test/integration/gateway-leases.spec.ts).
        'post /v1/leases', 'get /v1/leases', 'get /v1/leases/{key}', 'post /v1/leases/{key}/acquire', 'post /v1/leases/{key}/pause',
        'post /v1/leases/{key}/hold', 'post /v1/leases/{key}/resume', 'post /v1/leases/{key}/release', 'get /v1/leases/{key}/events',
        // A sandbox's timeout, durable as the lease's deadline (issue 18; test/e2e/sandbox-timeout.spec.ts).
        'post /v1/leases/{key}/timeout',
        // Read models: their state and a rebuild after a poisoned event (issue 17; test/e2e/projection-poison.spec.ts).
        'get /v1/projections', 'post /v1/projections/{name}/rebuild',
        // Runtimes sharing one store and the retirement of one (issue 17; test/e2e/several-runtimes.spec.ts).
        'get /v1/runtimes', 'post /v1/runtimes/{runtimeId}/retire',
        // Warm pools (issue 20; test/integration/docker-pools.spec.ts): the admin's state and drain.
        'get /v1/pools', 'post /v1/pools/{name}/drain',
        // The web console (issue 19; test/e2e/console.spec.ts, test/security/console-routes.spec.ts).
        'get /ui', 'get /ui/{asset}', 'get /v1/machines/{kind}', 'get /v1/streams/{stream}/timeline',
      ].sort(),
    );
    expect(openapi.doc.openapi).toBe('3.1.0');
    expect(openapi.compileAll()).toBeGreaterThan(listed.length);
  });
});

describe('routes over the real runtime (native)', () => {
  it('serve environments, allocations, sessions, executions, read models, replay, health and metrics in their documented shapes', async () => {
    const health = await documented('GET', '/healthz', '/healthz', 200, { token: null });
    expect(health).toMatchObject({ status: 'ok', runtimeId: expect.stringMatching(/^rt_/), epoch: 1, store: 'sqlite' });
    const { capabilities } = await documented('GET', '/v1/capabilities', '/v1/capabilities', 200);
    expect(capabilities).toMatchObject({ environments: true, executions: true });

    const env = await documented('POST', '/v1/environments', '/v1/environments', 201, {
      body: { name: 'Route Tour', description: 'every route', profile: { provider: 'native', idleSeconds: 600 } },
    });
    expect(env).toMatchObject({ object: 'environment', slug: 'route-tour', mount: '/env/route-tour', allocation: null });
    expect(env.profile).toMatchObject({ provider: 'native', idleSeconds: 600 });
    const listed = await documented('GET', '/v1/environments', '/v1/environments', 200);
    expect(listed.map((e: { id: string }) => e.id)).toContain(env.id);
    await documented('GET', '/v1/environments/{id}', `/v1/environments/${env.id}`, 200);
    const renamed = await documented('PUT', '/v1/environments/{id}', `/v1/environments/${env.id}`, 200, { body: { description: 'renamed' } });
    expect(renamed.description).toBe('renamed');

    const allocation = await documented('POST', '/v1/environments/{id}/allocations', `/v1/environments/${env.id}/allocations`, 201);
    expect(allocation).toMatchObject({ environmentId: env.id, state: 'ready', provider: 'native', ownership: 'borrowed', generation: 1 });
    const own = await documented('GET', '/v1/environments/{id}/allocations', `/v1/environments/${env.id}/allocations`, 200);
    expect(own.map((a: { allocationId: string }) => a.allocationId)).toContain(allocation.allocationId);
    const active = await documented('GET', '/v1/allocations', '/v1/allocations', 200);
    expect(active.map((a: { allocationId: string }) => a.allocationId)).toContain(allocation.allocationId);

    const session = await documented('POST', '/v1/sessions', '/v1/sessions', 201, { body: { environmentId: env.id } });
    expect(await documented('GET', '/v1/sessions/{id}', `/v1/sessions/${session.id}`, 200)).toMatchObject({ id: session.id, environmentId: env.id });

    const operationId = `tour-${Date.now()}`;
    const submitted = await documented('POST', '/v1/executions', '/v1/executions', 201, {
      body: { operationId, session: session.id, command: 'printf "out\\n"; printf "err\\n" >&2; exit 7' },
    });
    expect(submitted).toMatchObject({ operationId, environment: env.id, target: { environmentId: env.id, allocationId: allocation.allocationId, generation: 1 } });
    expect(['accepted', 'running']).toContain(submitted.status);
    const done = await documented('GET', '/v1/executions/{id}', `/v1/executions/${submitted.id}?waitMs=20000`, 200);
    expect(done).toMatchObject({ status: 'exited', exitCode: 7, command: ['/bin/sh', '-c', expect.any(String)] });
    const again = await documented('POST', '/v1/executions', '/v1/executions', 201, {
      body: { operationId, session: session.id, command: 'printf "out\\n"; printf "err\\n" >&2; exit 7' },
    });
    expect(again.id).toBe(submitted.id); // the same operationId never runs twice

    const output = await server.call(`/v1/executions/${submitted.id}/output?stream=stderr&cursor=1`);
    expect(output.status).toBe(200);
    expect(output.headers.get('content-type')).toBe('application/octet-stream');
    expect(output.headers.get('x-berth-cursor')).toBe('4');
    expect(output.headers.get('x-berth-complete')).toBe('true');
    expect(await output.text()).toBe('rr\n');

    const byOperation = await documented('GET', '/v1/executions', `/v1/executions?operationId=${operationId}`, 200);
    expect(byOperation.map((r: { id: string }) => r.id)).toEqual([submitted.id]);
    const byEnvironment = await documented('GET', '/v1/executions', `/v1/executions?environment=${env.id}&status=exited`, 200);
    expect(byEnvironment.map((r: { id: string }) => r.id)).toContain(submitted.id);

    const sleeper = await submit(server, env.id, ['sleep', '30']);
    await running(server, sleeper.id);
    const cancelled = await documented('POST', '/v1/executions/{id}/cancel', `/v1/executions/${sleeper.id}/cancel`, 200);
    expect(cancelled.id).toBe(sleeper.id);
    expect((await finished(server, sleeper.id)).status).toBe('cancelled');

    const activity = await documented('GET', '/v1/activity', '/v1/activity', 200);
    const entry = activity.find((a: { id: string }) => a.id === submitted.id);
    expect(entry).toMatchObject({ status: 'exited' });
    expect(JSON.stringify(activity)).not.toContain('printf'); // status and failure, never payloads
    const catalog = await documented('GET', '/v1/catalog', '/v1/catalog', 200);
    expect(catalog.map((e: { id: string }) => e.id)).toContain(env.id);

    const replay = await documented('GET', '/v1/streams/{stream}', `/v1/streams/execution-${submitted.id}?at=1`, 200);
    expect(replay).toHaveLength(2);
    expect(replay[0].event).toMatchObject({ stream: `execution-${submitted.id}`, revision: '0', type: 'execution.accepted' });
    expect(replay[1].stateBefore).toEqual(replay[0].stateAfter);
    const page = await documented('GET', '/v1/streams/{stream}/timeline', `/v1/streams/execution-${submitted.id}/timeline?from=1&limit=1`, 200);
    expect(page).toMatchObject({ actorType: 'execution', firstRevision: 0, next: 2, steps: [{ stateBefore: replay[1].stateBefore, stateAfter: replay[1].stateAfter }] });
    const machine = await documented('GET', '/v1/machines/{kind}', '/v1/machines/execution', 200);
    expect(machine.transitions).toContainEqual(expect.objectContaining({ source: replay[1].stateBefore, event: replay[1].event.type, targets: [replay[1].stateAfter] }));

    // Every scope's counts: the admin's (a member is forbidden, test/security/roles-and-quotas.spec.ts).
    const metrics = await server.call('/metrics', { token: tokens.admin });
    expect(metrics.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await metrics.text();
    expect(text).toMatch(/^berth_executions\{status="exited"\} \d+$/m);
    expect(text).toMatch(/^berth_executions\{status="cancelled"\} \d+$/m);
    expect(text).toMatch(/^berth_allocations\{state="ready"\} \d+$/m);
    expect(text).toMatch(/^berth_event_store_append_seconds_count \d+$/m);
    expect(text).toMatch(/^berth_projection_lag_events\{projection="catalog"\} \d+$/m);
    expect(text).toMatch(/^berth_lease_resumes_total\{machine="reused"\} \d+$/m);

    const released = await documented(
      'DELETE',
      '/v1/environments/{id}/allocations/{allocationId}',
      `/v1/environments/${env.id}/allocations/${allocation.allocationId}`,
      200,
    );
    expect(['releasing', 'released']).toContain(released.state);
    await documented('DELETE', '/v1/environments/{id}', `/v1/environments/${env.id}`, 204);
    const gone = await server.call(`/v1/environments/${env.id}`);
    expect(gone.status).toBe(404);
    expect(await gone.json()).toMatchObject({ error: { code: 'environment_not_found' } });
  });

  it('answers the documented conflicts: same operationId with another input, a stale target, a taken slug', async () => {
    const env = await createEnvironment(server);
    const first = await submit(server, env, ['true']);
    const conflict = await server.call('/v1/executions', { body: { operationId: first.operationId, environment: env, command: ['false'] } });
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toMatchObject({ error: { code: 'operation_conflict' } });
    const stale = await server.call('/v1/executions', {
      body: { operationId: `stale-${Date.now()}`, environment: env, command: ['true'], target: { environmentId: env, allocationId: 'halloc_gone', generation: 9 } },
    });
    expect(stale.status).toBe(409);
    expect(await stale.json()).toMatchObject({ error: { code: 'stale_target' } });
    const twin = await server.call('/v1/environments', { body: { name: 'Twin' } });
    expect(twin.status).toBe(201);
    const taken = await server.call('/v1/environments', { body: { name: 'twin' } });
    expect(taken.status).toBe(409);
    expect(await taken.json()).toMatchObject({ error: { code: 'environment_exists', detail: { slug: 'twin' } } });
  });
});

describe.skipIf(!dockerAvailable)('routes over the real runtime (docker)', () => {
  it('allocate a container, run in it as UID 1000 over HTTP, and release it', async () => {
    const env = await documented('POST', '/v1/environments', '/v1/environments', 201, {
      body: { name: `docker tour ${Date.now()}`, profile: { provider: 'docker', memoryMb: 128, network: 'none' } },
    });
    expect(env.availability).toBe('available');
    const allocation = await documented('POST', '/v1/environments/{id}/allocations', `/v1/environments/${env.id}/allocations`, 201);
    expect(allocation).toMatchObject({ provider: 'docker', ownership: 'managed', state: 'ready', identity: { resourceId: expect.any(String) } });
    const record = await submit(server, env.id, 'echo "in $(id -u)"; echo oops >&2; exit 3');
    const done = await documented('GET', '/v1/executions/{id}', `/v1/executions/${record.id}?waitMs=30000`, 200);
    expect(done).toMatchObject({ status: 'exited', exitCode: 3, target: { allocationId: allocation.allocationId } });
    expect(await (await server.call(`/v1/executions/${record.id}/output`)).text()).toBe('in 1000\n');
    expect(await (await server.call(`/v1/executions/${record.id}/output?stream=stderr`)).text()).toBe('oops\n');
    const released = await documented(
      'DELETE',
      '/v1/environments/{id}/allocations/{allocationId}',
      `/v1/environments/${env.id}/allocations/${allocation.allocationId}`,
      200,
    );
    expect(['releasing', 'released']).toContain(released.state);
  });
});
if (!dockerAvailable) console.log('skipped: docker routes (no Docker engine)');

describe('auth and tenant scopes', () => {
  it('never lets a token into a command environment', async () => {
    const env = await createEnvironment(server);
    const record = await submit(server, env, ['env']);
    expect((await finished(server, record.id)).status).toBe('exited');
    const seen = await (await server.call(`/v1/executions/${record.id}/output`)).text();
    expect(seen).toMatch(/^PATH=/m);
    for (const token of Object.values(tokens)) expect(seen).not.toContain(token);
    expect(seen).not.toMatch(/^BERTH_/m);
  });

  it('answers 401 without a token or with an unknown one, on every route but /healthz, the OpenAPI document and the console files', async () => {
    for (const route of Object.entries(openapi.doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => ({ m, path })))) {
      const path = route.path.replace('{id}', 'henv_00000000000000000000000000000000').replace('{allocationId}', 'x').replace('{stream}', 'execution-x').replace('{asset}', 'app.js');
      for (const token of [null, 'an-unknown-token-of-enough-length']) {
        const response = await server.call(path, { method: route.m.toUpperCase(), token, body: route.m === 'post' || route.m === 'put' ? {} : undefined });
        const text = await response.text();
        // The console's files are open: the page asks for a token itself (its data routes need one).
        if (route.path === '/healthz' || route.path === '/v1/openapi.json' || route.path.startsWith('/ui')) expect(response.status).toBe(200);
        else {
          expect(response.status, `${route.m} ${path}`).toBe(401);
          expect(JSON.parse(text)).toMatchObject({ error: { code: 'unauthorized' } });
        }
      }
    }
  });

  it("keeps tenant A's resources invisible to tenant B: cannot see, run in, or cancel them (404)", async () => {
    const env = await createEnvironment(server, tokens.alice);
    const sleeper = await submit(server, env, ['sleep', '20'], {}, tokens.alice);
    await running(server, sleeper.id);
    const bob = { token: tokens.bob };
    const expect404 = async (path: string, code: string, init: { method?: string; body?: unknown } = {}) => {
      const response = await server.call(path, { ...init, ...bob });
      const text = await response.text();
      expect(response.status, `${init.method ?? 'GET'} ${path}: ${text}`).toBe(404);
      expect(JSON.parse(text).error.code).toBe(code);
      expect(text).not.toContain('alice');
    };
    await expect404(`/v1/environments/${env}`, 'environment_not_found');
    await expect404(`/v1/environments/${env}`, 'environment_not_found', { method: 'PUT', body: { description: 'mine now' } });
    await expect404(`/v1/environments/${env}`, 'environment_not_found', { method: 'DELETE' });
    await expect404(`/v1/environments/${env}/allocations`, 'environment_not_found', { method: 'POST' });
    await expect404(`/v1/environments/${env}/allocations`, 'environment_not_found');
    await expect404('/v1/executions', 'environment_not_found', { method: 'POST', body: { operationId: 'bob-in-alice', environment: env, command: ['id'] } });
    await expect404('/v1/sessions', 'environment_not_found', { method: 'POST', body: { environmentId: env } });
    await expect404(`/v1/executions/${sleeper.id}`, 'not_found');
    await expect404(`/v1/executions/${sleeper.id}/output`, 'not_found');
    await expect404(`/v1/executions/${sleeper.id}/events`, 'not_found');
    await expect404(`/v1/executions/${sleeper.id}/cancel`, 'not_found', { method: 'POST' });
    await expect404(`/v1/streams/execution-${sleeper.id}`, 'not_found');
    await expect404(`/v1/streams/environment-${env}`, 'not_found');
    for (const path of ['/v1/environments', '/v1/catalog', '/v1/allocations', '/v1/activity', `/v1/executions?operationId=${sleeper.operationId}`]) {
      const text = await (await server.call(path, bob)).text();
      expect(text, path).not.toContain(env);
      expect(text, path).not.toContain(sleeper.id);
    }
    const record = await server.json(`/v1/executions/${sleeper.id}`);
    expect(record.status).toBe('running'); // bob's cancel touched nothing
    await server.call(`/v1/executions/${sleeper.id}/cancel`, { method: 'POST' });
  });
});
