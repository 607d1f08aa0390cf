/**
 * Leases over HTTP, through the real gateway on a real socket over the real runtime (native provider): bind allocates
 * nothing, acquires share one machine, pause/hold/resume/release answer the lease, leases are listed by work, the
 * pause feed (typed client) sees every change of state and resumes from a position, and /metrics counts paused work
 * and resumes. Answers are checked against the OpenAPI document the server publishes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Berth, type LeasePauseFrame } from '../../src/client/index.ts';
import { OpenApiCheck } from '../e2e/openapi-check.ts';
import { startGateway, tokens, type RunningGateway } from './gateway-fixture.ts';
import { call, expectError, expectStatus, documentedCalls } from './workspace-http.ts';

let gw: RunningGateway;
let openapi: OpenApiCheck;

beforeAll(async () => {
  gw = await startGateway();
  openapi = new OpenApiCheck(await expectStatus(call(gw, 'GET', '/v1/openapi.json'), 200));
});
afterAll(() => gw?.close());

const documented = documentedCalls(() => gw, () => openapi);

const bindBody = (key: string, workId: string) => ({ key, work: { kind: 'workflow', id: workId }, profile: { provider: 'native' }, idleSeconds: 600 });

async function metric(name: string, labels: string): Promise<number | undefined> {
  const text = (await call(gw, 'GET', '/metrics', { token: tokens.admin })).text;
  const found = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return found === undefined ? undefined : Number(found.split(' ')[1]);
}

describe('leases over HTTP', () => {
  it('should bind without allocating, answer the same binding with 200, and refuse another work for the key', async () => {
    const lease = await documented('POST', '/v1/leases', '/v1/leases', 201, { json: bindBody('wf-bind', 'w-bind') });
    expect(lease).toMatchObject({ object: 'lease', key: 'wf-bind', state: 'running', machine: null, environmentId: null, pause: null, idleSeconds: 600 });
    expect(await documented('POST', '/v1/leases', '/v1/leases', 200, { json: bindBody('wf-bind', 'w-bind') })).toMatchObject({ id: lease.id });
    await expectError(call(gw, 'POST', '/v1/leases', { json: bindBody('wf-bind', 'w-other') }), 409, 'operation_conflict');
    expect((await call(gw, 'GET', '/v1/allocations')).json).toEqual([]);
  });

  it('should give every acquire of a lease the same machine', async () => {
    await documented('POST', '/v1/leases', '/v1/leases', 201, { json: bindBody('wf-acquire', 'w-acquire') });
    const first = await documented('POST', '/v1/leases/wf-acquire/acquire', '/v1/leases/{key}/acquire', 200, { json: {} });
    expect(first).toMatchObject({ reused: false, target: { generation: 1 }, lease: { state: 'running', machine: { allocationId: first.target.allocationId } } });
    const again = await Promise.all(Array.from({ length: 5 }, () => documented('POST', '/v1/leases/wf-acquire/acquire', '/v1/leases/{key}/acquire', 200)));
    for (const answer of again) expect(answer).toMatchObject({ reused: true, target: first.target });
    const allocations = (await call(gw, 'GET', '/v1/allocations')).json as Array<{ allocationId?: string; id?: string }>;
    expect(allocations.filter((a) => (a.allocationId ?? a.id) === first.target.allocationId)).toHaveLength(1);
  });

  it('should list the leases of one work', async () => {
    await documented('POST', '/v1/leases', '/v1/leases', 201, { json: bindBody('wf-list-a', 'w-list') });
    await documented('POST', '/v1/leases', '/v1/leases', 201, { json: bindBody('wf-list-b', 'w-list') });
    await documented('POST', '/v1/leases', '/v1/leases', 201, { json: bindBody('wf-list-c', 'w-list-other') });
    const listed = await documented('GET', '/v1/leases?workKind=workflow&workId=w-list', '/v1/leases', 200);
    expect(listed.map((l: { key: string }) => l.key).sort()).toEqual(['wf-list-a', 'wf-list-b']);
    const page = await call(gw, 'GET', '/v1/leases?workKind=workflow&workId=w-list&limit=1');
    expect(page.json).toHaveLength(1);
    expect(page.headers.get('x-berth-next-cursor')).toBeTruthy();
  });

  it('should pause, resume at acquire, hold, resume and release, with a pause frame for each change and the metrics', async () => {
    const client = await Berth.connect({ url: gw.url, token: tokens.alice });
    await client.leases.bind(bindBody('wf-pause', 'w-pause') as never);
    const { target } = await client.leases.acquire('wf-pause');
    const frames: LeasePauseFrame[] = [];
    const feed = client.leases.events('wf-pause');
    const followed = (async () => {
      for await (const frame of feed) frames.push(frame);
    })();

    const retryAt = Date.now() + 3_600_000;
    const paused = await documented('POST', '/v1/leases/wf-pause/pause', '/v1/leases/{key}/pause', 200, { json: { cause: { kind: 'rate_limited', message: 'slow down' }, retryAt } });
    expect(paused).toMatchObject({ state: 'paused', pause: { state: 'paused', cause: { kind: 'rate_limited' }, attempt: 1, retryAt }, machine: { allocationId: target.allocationId } });
    expect(await metric('berth_leases_paused', 'work_kind="workflow"')).toBe(1);
    const resumes = (await metric('berth_lease_resumes_total', 'machine="reused"')) ?? 0;

    // An acquire of a paused lease resumes it on the machine it kept.
    const resumed = await client.leases.acquire('wf-pause');
    expect(resumed).toMatchObject({ reused: true, target, lease: { state: 'running', pause: null } });
    expect(await metric('berth_lease_resumes_total', 'machine="reused"')).toBe(resumes + 1);
    expect(await metric('berth_leases_paused', 'work_kind="workflow"')).toBeUndefined();

    await client.leases.pause('wf-pause', { cause: { kind: 'waiting_input' } });
    expect(await documented('POST', '/v1/leases/wf-pause/hold', '/v1/leases/{key}/hold', 200)).toMatchObject({ state: 'held', pause: { state: 'held', attempt: 2, retryAt: null } });
    await expectError(call(gw, 'POST', '/v1/leases/wf-pause/acquire', { json: {} }), 409, 'invalid_state');
    expect(await documented('POST', '/v1/leases/wf-pause/resume', '/v1/leases/{key}/resume', 200)).toMatchObject({ state: 'running', pause: null });
    expect(await documented('POST', '/v1/leases/wf-pause/release', '/v1/leases/{key}/release', 200)).toMatchObject({ state: 'released' });
    await followed;

    expect(frames.map((f) => [f.state, f.cause?.kind ?? null, f.attempt])).toEqual([
      ['paused', 'rate_limited', 1],
      ['running', null, null],
      ['paused', 'waiting_input', 2],
      ['held', 'waiting_input', 2],
      ['running', null, null],
      ['releasing', null, null],
      ['released', null, null],
    ]);
    expect(frames[0]).toMatchObject({ key: 'wf-pause', retryAt });
    expect(new Set(frames.map((f) => f.position)).size).toBe(frames.length);

    // Resumed after the third frame: exactly the rest, from the recorded stream.
    const rest: LeasePauseFrame[] = [];
    for await (const frame of client.leases.events('wf-pause', frames[2].position)) rest.push(frame);
    expect(rest).toEqual(frames.slice(3));
    const raw = await call(gw, 'GET', '/v1/leases/wf-pause/events', { headers: { 'last-event-id': String(frames[5].position) } });
    expect(raw.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(raw.text).toContain(`id: ${frames[6].position}\nevent: pause\n`);
    expect(raw.text).not.toContain(`id: ${frames[5].position}\n`);

    expect((await call(gw, 'GET', '/v1/allocations')).json.some((a: { allocationId?: string }) => a.allocationId === target.allocationId)).toBe(false);
  }, 60_000);
});
