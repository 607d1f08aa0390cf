/**
 * Workspaces and tool turns over HTTP, through the real gateway on a real socket over the real runtime: a managed
 * workspace, a session bound to it with a cwd, a turn, every file tool with its byte-version preconditions, release,
 * the paged history, workspace_busy for a second turn, and the OpenAPI document (answers checked against it).
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenApiCheck, type OpenApiDocument } from '../e2e/openapi-check.ts';
import { startGateway, tokens, type RunningGateway } from './gateway-fixture.ts';
import { call, expectError, expectStatus, q, documentedCalls, tenant } from './workspace-http.ts';

let gw: RunningGateway;
let openapi: OpenApiCheck;

beforeAll(async () => {
  gw = await startGateway();
  openapi = new OpenApiCheck(await expectStatus(call(gw, 'GET', '/v1/openapi.json'), 200));
});
afterAll(() => gw?.close());

const documented = documentedCalls(() => gw, () => openapi);

const T = '/v1/sessions/{id}/turns/{turnId}';

describe('workspaces and turns over HTTP', () => {
  it('should run a whole turn: create, bind, open, write, read, edit, list, stat, mkdir, delete, release, history', async () => {
    const ws = await documented('POST', '/v1/workspaces', '/v1/workspaces', 201, { json: { name: 'task' } });
    expect(ws).toMatchObject({ object: 'workspace', kind: 'managed', name: 'task', generation: 1, holder: null });
    expect((await documented('GET', `/v1/workspaces/${ws.id}`, '/v1/workspaces/{id}', 200)).id).toBe(ws.id);

    // The session starts in src/; the directory must exist before a turn opens there.
    const bare = await documented('POST', '/v1/sessions', '/v1/sessions', 201, { json: { workspaceId: ws.id } });
    const setup = await documented('POST', `/v1/sessions/${bare.id}/turns`, '/v1/sessions/{id}/turns', 201, { json: {} });
    const setupFiles = `/v1/sessions/${bare.id}/turns/${setup.id}/files`;
    expect(await documented('POST', `${setupFiles}/mkdir`, `${T}/files/mkdir`, 201, { json: { path: 'src/deep', parents: true } })).toEqual({
      changes: [
        { path: 'src', kind: 'directory', before: null, after: expect.any(Object) },
        { path: 'src/deep', kind: 'directory', before: null, after: expect.any(Object) },
      ],
    });
    await documented('POST', `/v1/sessions/${bare.id}/turns/${setup.id}/release`, `${T}/release`, 200, { json: {} });

    const session = await documented('POST', '/v1/sessions', '/v1/sessions', 201, { json: { workspaceId: ws.id, cwd: 'src' } });
    expect(session).toMatchObject({ workspaceId: ws.id, workspaceGeneration: 1, cwd: 'src' });
    const turn = await documented('POST', `/v1/sessions/${session.id}/turns`, '/v1/sessions/{id}/turns', 201, { json: {} });
    expect(turn).toMatchObject({ object: 'turn', state: 'open', sessionId: session.id, workspaceId: ws.id });
    expect((await documented('GET', `/v1/workspaces/${ws.id}`, '/v1/workspaces/{id}', 200)).holder).toMatchObject({ turnId: turn.id, sessionId: session.id });
    const files = `/v1/sessions/${session.id}/turns/${turn.id}/files`;

    // Create only: the first lands, the second is 412 and writes nothing.
    const created = await documented('PUT', `${files}${q('src/a.txt')}`, `${T}/files`, 200, { body: 'one\n', headers: { 'if-none-match': '*' } });
    expect(created).toMatchObject({ path: 'src/a.txt', size: 4, version: expect.stringMatching(/^sha256:[0-9a-f]{64}$/) });
    const exists = await expectError(call(gw, 'PUT', `${files}${q('src/a.txt')}`, { body: 'other\n', headers: { 'if-none-match': '*' } }), 412, 'stale_version');
    expect(exists.detail).toMatchObject({ expected: 'absent', actual: created.version });

    const read = await call(gw, 'GET', `${files}${q('src/a.txt')}`);
    expect(read.status).toBe(200);
    expect(read.text).toBe('one\n');
    expect(read.headers.get('etag')).toBe(`"${created.version}"`);
    expect(read.headers.get('x-berth-version')).toBe(created.version);
    expect(read.headers.get('x-berth-size')).toBe('4');
    const range = await call(gw, 'GET', `${files}${q('src/a.txt', '&offset=1&limit=2')}`);
    expect([range.text, range.headers.get('x-berth-offset'), range.headers.get('x-berth-version')]).toEqual(['ne', '1', created.version]);

    // If-Match with the ETag as read: written; the same (now stale) ETag again: 412, nothing written.
    const second = await documented('PUT', `${files}${q('src/a.txt')}`, `${T}/files`, 200, { body: 'two\n', headers: { 'if-match': read.headers.get('etag')! } });
    const stale = await expectError(call(gw, 'PUT', `${files}${q('src/a.txt')}`, { body: 'three\n', headers: { 'if-match': read.headers.get('etag')! } }), 412, 'stale_version');
    expect(stale.detail).toMatchObject({ path: 'src/a.txt', expected: created.version, actual: second.version });
    expect((await call(gw, 'GET', `${files}${q('src/a.txt')}`)).text).toBe('two\n');

    const edited = await documented('POST', `${files}/edit`, `${T}/files/edit`, 200, { json: { path: 'src/a.txt', old: 'tw', new: 'TW', ifMatch: second.version } });
    expect((await call(gw, 'GET', `${files}${q('src/a.txt')}`)).text).toBe('TWo\n');
    await expectError(call(gw, 'POST', `${files}/edit`, { json: { path: 'src/a.txt', old: 'o', new: 'O', ifMatch: second.version } }), 412, 'stale_version');
    expect((await expectError(call(gw, 'POST', `${files}/edit`, { json: { path: 'src/a.txt', old: 'zz', new: 'y' } }), 400, 'invalid_request')).detail).toMatchObject({ reason: 'old_text_missing' });

    const listed = await documented('GET', `${files}/list${q('src')}`, `${T}/files/list`, 200);
    expect(listed.entries.map((e: { path: string; type: string }) => [e.path, e.type])).toEqual([
      ['src/a.txt', 'file'],
      ['src/deep', 'directory'],
    ]);
    expect(await documented('GET', `${files}/stat${q('src/a.txt')}`, `${T}/files/stat`, 200)).toMatchObject({ type: 'file', size: 4, version: edited.version });
    await expectError(call(gw, 'GET', `${files}/stat${q('src/nope')}`), 404, 'not_found');

    expect(await documented('DELETE', `${files}${q('src/a.txt')}`, `${T}/files`, 200)).toMatchObject({ changes: [{ path: 'src/a.txt', before: { hash: edited.version }, after: null }] });
    await expectError(call(gw, 'GET', `${files}${q('src/a.txt')}`), 404, 'not_found');

    const released = await documented('POST', `/v1/sessions/${session.id}/turns/${turn.id}/release`, `${T}/release`, 200, { json: {} });
    expect(released).toMatchObject({ state: 'released', cleared: false });
    // Idempotent, and the released turn admits nothing.
    expect((await documented('POST', `/v1/sessions/${session.id}/turns/${turn.id}/release`, `${T}/release`, 200, { json: {} })).state).toBe('released');
    expect((await expectError(call(gw, 'GET', `${files}/list`), 409, 'invalid_state')).detail).toMatchObject({ reason: 'released' });
    expect((await documented('GET', `/v1/workspaces/${ws.id}`, '/v1/workspaces/{id}', 200)).holder).toBeNull();

    // History, two entries a page, followed by x-berth-next-cursor.
    const tools: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await call(gw, 'GET', `/v1/workspaces/${ws.id}/history?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status).toBe(200);
      openapi.expect('GET', '/v1/workspaces/{id}/history', 200, page.json);
      expect(page.json.length).toBeLessThanOrEqual(2);
      tools.push(...page.json.map((h: { tool: string; turnId: string; changes: { path: string }[] }) => `${h.tool} ${h.changes.map((c) => c.path).join(',')}`));
      cursor = page.headers.get('x-berth-next-cursor');
      pages++;
    } while (cursor);
    expect(tools).toEqual(['mkdir src,src/deep', 'write src/a.txt', 'write src/a.txt', 'edit src/a.txt', 'remove src/a.txt']);
    // Pages are of the workspace's stream (its own events included), so some hold fewer entries than the limit.
    expect(pages).toBeGreaterThanOrEqual(3);
  });

  it('should answer workspace_busy (409) to a second turn on the same storage until the first is released', async () => {
    const ws = (await expectStatus(call(gw, 'POST', '/v1/workspaces', { json: {} }), 201)).id;
    const [s1, s2] = [
      await expectStatus(call(gw, 'POST', '/v1/sessions', { json: { workspaceId: ws } }), 201),
      await expectStatus(call(gw, 'POST', '/v1/sessions', { json: { workspaceId: ws } }), 201),
    ];
    const first = await expectStatus(call(gw, 'POST', `/v1/sessions/${s1.id}/turns`, { json: {} }), 201);
    const busy = await expectError(call(gw, 'POST', `/v1/sessions/${s2.id}/turns`, { json: {} }), 409, 'workspace_busy');
    expect(busy.detail).toMatchObject({ reason: 'held' });
    // Waiting: answered once the first is released.
    const waiting = call(gw, 'POST', `/v1/sessions/${s2.id}/turns`, { json: { waitMs: 20_000 } });
    await expectStatus(call(gw, 'POST', `/v1/sessions/${s1.id}/turns/${first.id}/release`, { json: {} }), 200);
    const second = await expectStatus(waiting, 201);
    expect((await expectStatus(call(gw, 'GET', `/v1/workspaces/${ws}`), 200)).holder.turnId).toBe(second.id);
    // A managed workspace is not deleted while a turn holds it; it is once released.
    await expectError(call(gw, 'DELETE', `/v1/workspaces/${ws}`), 409, 'workspace_busy');
    await expectStatus(call(gw, 'POST', `/v1/sessions/${s2.id}/turns/${second.id}/release`, { json: {} }), 200);
    await expectStatus(call(gw, 'DELETE', `/v1/workspaces/${ws}`), 204);
  });

  it('should stream a large file both ways: the bytes and version hold, a release waits for a download under way, a download cut off lets go, one changed while sent stops short', { timeout: 60_000 }, async () => {
    const t = await tenant(gw, tokens.alice);
    const data = randomBytes(32 * 1024 * 1024);
    const version = `sha256:${createHash('sha256').update(data).digest('hex')}`;
    // Written and hashed as it arrives.
    const written = await expectStatus(call(gw, 'PUT', `${t.files}${q('big.bin')}`, { body: data }), 200);
    expect(written).toMatchObject({ path: 'big.bin', size: data.length, version });
    expect(readFileSync(join(t.root, 'big.bin')).equals(data)).toBe(true);
    // Once settled its version is remembered, and from then on it is sent from the file as it is read.
    await sleep(2_100);
    for (let i = 0; i < 2; i++) {
      const read = await call(gw, 'GET', `${t.files}${q('big.bin')}`);
      expect(read.status).toBe(200);
      expect(read.headers.get('x-berth-version')).toBe(version);
      expect(read.bytes.equals(data)).toBe(true);
    }
    const range = await call(gw, 'GET', `${t.files}${q('big.bin', `&offset=${3 * 1024 * 1024}&limit=${5 * 1024 * 1024}`)}`);
    expect(range.bytes.equals(data.subarray(3 * 1024 * 1024, 8 * 1024 * 1024))).toBe(true);

    const { port } = new URL(gw.url);
    // A reader that takes nothing: the download stalls in the socket, and the turn counts it as a call under way.
    const stalled = httpRequest({ host: '127.0.0.1', port, path: `${t.files}${q('big.bin')}`, headers: gw.headers(tokens.alice) });
    const answered = new Promise<IncomingMessage>((resolve) => stalled.once('response', resolve));
    stalled.end();
    const response = await answered;
    response.pause();
    const busy = await expectError(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { json: { waitMs: 300 } }), 409, 'workspace_busy');
    expect(busy.detail).toMatchObject({ reason: 'calls_running' });
    // Cut off: the file's stream ends with the answer, and the release goes through.
    response.destroy();
    stalled.destroy();
    const released = await expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { json: { waitMs: 5_000 } }), 200);
    expect(released).toMatchObject({ state: 'released' });

    const next = await expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns`, { json: {} }), 201);
    const files = `/v1/sessions/${t.session}/turns/${next.id}/files`;
    // Changed while it is sent (one byte, same size): the answer stops short of its length, never a whole body under
    // a version it no longer has.
    const changing = httpRequest({ host: '127.0.0.1', port, path: `${files}${q('big.bin')}`, headers: gw.headers(tokens.alice) });
    changing.on('error', () => undefined);
    const changingAnswer = new Promise<IncomingMessage>((resolve) => changing.once('response', resolve));
    changing.end();
    const partial = await changingAnswer;
    partial.pause();
    expect(partial.headers['x-berth-version']).toBe(version);
    const fd = openSync(join(t.root, 'big.bin'), 'r+');
    writeSync(fd, Buffer.from([data[0]! ^ 1]), 0, 1, 0);
    closeSync(fd);
    let received = 0;
    const outcome = await new Promise<string>((resolve) => {
      partial.on('data', (chunk: Buffer) => (received += chunk.length));
      partial.on('end', () => resolve('end'));
      partial.on('error', () => resolve('error'));
      partial.on('aborted', () => resolve('aborted'));
      partial.resume();
    });
    expect(outcome).not.toBe('end');
    expect(received).toBeLessThan(data.length);
  });

  it('should list the workspace and turn routes in the OpenAPI document', async () => {
    const doc = (await expectStatus(call(gw, 'GET', '/v1/openapi.json', { token: tokens.bob }), 200)) as OpenApiDocument;
    const routes = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => `${m.toUpperCase()} ${path}`));
    expect(routes).toEqual(
      expect.arrayContaining([
        'POST /v1/workspaces',
        'GET /v1/workspaces',
        'GET /v1/workspaces/{id}',
        'DELETE /v1/workspaces/{id}',
        'GET /v1/workspaces/{id}/history',
        'POST /v1/workspaces/{id}/holder/clear',
        'DELETE /v1/sessions/{id}',
        'POST /v1/sessions/{id}/turns',
        `GET ${T}`,
        `POST ${T}/release`,
        `GET ${T}/files`,
        `PUT ${T}/files`,
        `DELETE ${T}/files`,
        `GET ${T}/files/list`,
        `GET ${T}/files/stat`,
        `POST ${T}/files/edit`,
        `POST ${T}/files/mkdir`,
        `PUT ${T}/files/inputs`,
      ]),
    );
    expect(openapi.compileAll()).toBeGreaterThan(20);
  });
});
