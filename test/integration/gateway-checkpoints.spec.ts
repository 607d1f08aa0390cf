/**
 * Workspace checkpoints over HTTP, through the real gateway on a real socket over the real runtime (native provider,
 * a managed workspace): checkpoints taken in a turn and listed with the revision they made, a tree, a diff between
 * two, a restore recorded in the history that puts the files back, a stale restore that changes nothing, the
 * view of a workspace no allocation holds (answers checked against the OpenAPI document), and an incremental
 * checkpoint that misses nothing a command changed right after the one before (same size, mtime put back).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OpenApiCheck } from '../e2e/openapi-check.ts';
import { createEnvironment, startGateway, tokens, type RunningGateway } from './gateway-fixture.ts';
import { bwrapOrSkip } from './native-harness.ts';
import { call, expectError, expectStatus, letSandboxReach, q, runInTurn, tenant, type Tenant, documentedCalls } from './workspace-http.ts';

let gw: RunningGateway;
let openapi: OpenApiCheck;
const bwrap = bwrapOrSkip();

beforeAll(async () => {
  gw = await startGateway();
  letSandboxReach(gw);
  openapi = new OpenApiCheck(await expectStatus(call(gw, 'GET', '/v1/openapi.json'), 200));
});
afterAll(() => gw?.close());

const documented = documentedCalls(() => gw, () => openapi);

const T = '/v1/sessions/{id}/turns/{turnId}';
const W = '/v1/workspaces/{id}';
const CHECKPOINT_ID = /^sha256:[0-9a-f]{64}$/;

/** A checkpoint in `turn`, taken again while a command's recording moves the head under it (stale_version, 412). */
async function takeCheckpoint(turn: string): Promise<any> {
  for (let tries = 0; ; tries++) {
    const got = await call(gw, 'POST', `${turn}/checkpoints`);
    if (got.status === 201) return got.json;
    expect({ status: got.status, code: got.json.error.code, tries: tries < 20 }).toEqual({ status: 412, code: 'stale_version', tries: true });
  }
}

/** The workspace root's files (path=bytes), directories (path/), sorted. */
function onDisk(root: string, prefix = ''): string[] {
  return readdirSync(join(root, prefix), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? [`${prefix}${e.name}/`, ...onDisk(root, `${prefix}${e.name}/`)] : [`${prefix}${e.name}=${readFileSync(join(root, prefix, e.name), 'utf8')}`]))
    .sort();
}

describe('checkpoints of a managed workspace over HTTP', () => {
  let t: Tenant;
  let turn: string;
  const put = (path: string, body: string) => expectStatus(call(gw, 'PUT', `${t.files}${q(path, '&parents=true')}`, { body }), 200);
  const history = () => expectStatus(call(gw, 'GET', `/v1/workspaces/${t.workspace}/history?limit=1000`), 200);

  beforeAll(async () => {
    t = await tenant(gw, tokens.alice);
    turn = `/v1/sessions/${t.session}/turns/${t.turn}`;
  });
  afterAll(() => expectStatus(call(gw, 'POST', `${turn}/release`, { json: {} }), 200));

  it('should checkpoint, list, show a tree, diff, restore (recorded, files back) and refuse a stale restore', async () => {
    await put('a.txt', 'one\n');
    await put('dir/b.txt', 'bee\n');
    const first = await documented('POST', `${turn}/checkpoints`, `${T}/checkpoints`, 201);
    expect(first).toMatchObject({ id: expect.stringMatching(CHECKPOINT_ID), object: 'checkpoint', workspaceId: t.workspace, reason: 'explicit', files: 2, bytes: 8 });
    // Two tool writes made revisions 1 and 2: the checkpoint made the third.
    expect(first.revision).toBe(3);

    const listed = await documented('GET', `/v1/workspaces/${t.workspace}/checkpoints`, `${W}/checkpoints`, 200);
    expect(listed).toEqual([first]);

    const tree = await documented('GET', `/v1/workspaces/${t.workspace}/checkpoints/${first.id}`, `${W}/checkpoints/{checkpointId}`, 200);
    expect(tree).toMatchObject(first);
    expect(tree.truncated).toBeUndefined();
    expect(tree.entries.map((e: { path: string; type: string; size: number }) => [e.path, e.type, e.size])).toEqual([
      ['a.txt', 'file', 4],
      ['dir', 'directory', 0],
      ['dir/b.txt', 'file', 4],
    ]);
    // What a caller sees of an entry: no blob location, no capture hint.
    for (const entry of tree.entries) expect(Object.keys(entry).sort()).toEqual(entry.type === 'file' ? ['hash', 'mode', 'path', 'size', 'type'] : ['mode', 'path', 'size', 'type']);

    await put('a.txt', 'two, longer\n');
    await put('c.txt', 'sea\n');
    await expectStatus(call(gw, 'DELETE', `${t.files}${q('dir/b.txt')}`), 200);
    const second = await documented('POST', `${turn}/checkpoints`, `${T}/checkpoints`, 201);
    expect(second.id).not.toBe(first.id);
    expect(second.revision).toBe(first.revision + 4); // three tool calls, then the checkpoint
    expect((await documented('GET', `/v1/workspaces/${t.workspace}/checkpoints`, `${W}/checkpoints`, 200)).map((c: { id: string; revision: number }) => [c.id, c.revision])).toEqual([
      [first.id, first.revision],
      [second.id, second.revision],
    ]);
    // Paged one by one: the walk still finds both, in order.
    const walked: string[] = [];
    let cursor: string | null = null;
    do {
      const page = await call(gw, 'GET', `/v1/workspaces/${t.workspace}/checkpoints?limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      expect(page.status).toBe(200);
      walked.push(...page.json.map((c: { id: string }) => c.id));
      cursor = page.headers.get('x-berth-next-cursor');
    } while (cursor);
    expect(walked).toEqual([first.id, second.id]);

    const diff = await documented('GET', `/v1/workspaces/${t.workspace}/diff?from=${first.id}&to=${second.id}`, `${W}/diff`, 200);
    expect(diff).toMatchObject({ from: first.id, to: second.id });
    expect(diff.truncated).toBeUndefined();
    expect(diff.changes.map((c: { path: string; before: unknown; after: unknown }) => [c.path, c.before === null ? '+' : c.after === null ? '-' : 'M'])).toEqual([
      ['a.txt', 'M'],
      ['c.txt', '+'],
      ['dir/b.txt', '-'],
    ]);
    expect(diff.changes[0]).toMatchObject({ type: 'file', before: { size: 4 }, after: { size: 12 } });
    const backwards = await documented('GET', `/v1/workspaces/${t.workspace}/diff?from=${second.id}&to=${first.id}`, `${W}/diff`, 200);
    expect(backwards.changes.map((c: { path: string }) => c.path)).toEqual(['a.txt', 'c.txt', 'dir/b.txt']);

    // Restore the first on the head it builds on: recorded as `restore`, the files back on disk and through the tools.
    const entriesBefore = (await history()).length;
    const restored = await documented('POST', `${turn}/restore`, `${T}/restore`, 200, { json: { checkpoint: first.id, expectedRevision: second.revision } });
    expect(restored.checkpointId).toBe(first.id);
    expect(restored.changes.map((c: { path: string }) => c.path)).toEqual(['a.txt', 'c.txt', 'dir/b.txt']);
    expect(onDisk(t.root)).toEqual(['a.txt=one\n', 'dir/', 'dir/b.txt=bee\n']);
    expect((await call(gw, 'GET', `${t.files}${q('a.txt')}`)).text).toBe('one\n');
    const entries = await history();
    expect(entries.length).toBe(entriesBefore + 1);
    expect(entries.at(-1)).toMatchObject({ tool: 'restore', turnId: t.turn });
    expect(entries.at(-1).changes.map((c: { path: string }) => c.path)).toEqual(['a.txt', 'c.txt', 'dir/b.txt']);

    // A wrong expectedRevision (the head moved on with the restore and a write): 412, nothing restored or recorded.
    await put('a.txt', 'three\n');
    const stale = await expectError(call(gw, 'POST', `${turn}/restore`, { json: { checkpoint: second.id, expectedRevision: second.revision } }), 412, 'stale_version');
    expect(stale.detail).toMatchObject({ workspaceId: t.workspace, expected: second.revision, head: second.revision + 2 });
    expect(onDisk(t.root)).toEqual(['a.txt=three\n', 'dir/', 'dir/b.txt=bee\n']);
    expect((await history()).length).toBe(entries.length + 1); // only the write of three
    // The head named in the refusal is the one to build on.
    await documented('POST', `${turn}/restore`, `${T}/restore`, 200, { json: { checkpoint: second.id, expectedRevision: stale.detail.head } });
    expect(onDisk(t.root)).toEqual(['a.txt=two, longer\n', 'c.txt=sea\n', 'dir/']);
  });

  it('should answer the view of a workspace no allocation holds as unbound, and a detach of it as it is', async () => {
    const expected = { object: 'mount', workspaceId: t.workspace, state: 'unbound', target: null, mountGeneration: 0, revision: null, pins: [], problem: null };
    expect(await documented('GET', `/v1/workspaces/${t.workspace}/mount`, `${W}/mount`, 200)).toEqual(expected);
    expect(await documented('POST', `/v1/workspaces/${t.workspace}/detach`, `${W}/detach`, 200)).toEqual(expected);
  });

  it('should refuse malformed checkpoint ids as invalid_request, and an unpublished well-formed one as not_found', async () => {
    const unknown = `sha256:${'0'.repeat(64)}`;
    for (const bad of ['sha256:zz', 'sha256:' + 'A'.repeat(64), 'md5:' + '0'.repeat(32), 'x'.repeat(300)]) {
      await expectError(call(gw, 'GET', `/v1/workspaces/${t.workspace}/checkpoints/${encodeURIComponent(bad)}`), 400, 'invalid_request');
      await expectError(call(gw, 'GET', `/v1/workspaces/${t.workspace}/diff?from=${encodeURIComponent(bad)}&to=${unknown}`), 400, 'invalid_request');
      await expectError(call(gw, 'POST', `${turn}/restore`, { json: { checkpoint: bad } }), 400, 'invalid_request');
    }
    await expectError(call(gw, 'GET', `/v1/workspaces/${t.workspace}/checkpoints/${unknown}`), 404, 'not_found');
    await expectError(call(gw, 'POST', `${turn}/restore`, { json: { checkpoint: unknown } }), 404, 'not_found');
    await expectError(call(gw, 'GET', `/v1/workspaces/${t.workspace}/checkpoints?order=desc`), 400, 'invalid_request');
  });
});

describe('checkpoints right after a shell command', () => {
  // A command's changes reach the head's revision only once recorded after it ends: a checkpoint or a restore taken
  // at once must still see what is on disk, not the tree cached for that revision.
  it.skipIf(!bwrap)('should hold the files a command just wrote, and a restore should take them away', { timeout: 120_000 }, async () => {
    const env = await createEnvironment(gw, tokens.alice);
    const t = await tenant(gw, tokens.alice, { environmentId: env });
    const turn = `/v1/sessions/${t.session}/turns/${t.turn}`;
    const paths = async (id: string) => (await expectStatus(call(gw, 'GET', `/v1/workspaces/${t.workspace}/checkpoints/${id}`), 200)).entries.map((e: { path: string }) => e.path);
    const first = await takeCheckpoint(turn);
    for (let i = 0; i < 5; i++) {
      expect((await runInTurn(gw, t, `echo ${i} > f${i}.txt`)).status).toBe('exited');
      const taken = await takeCheckpoint(turn);
      expect(await paths(taken.id)).toEqual(Array.from({ length: i + 1 }, (_, j) => `f${j}.txt`));
    }
    expect((await runInTurn(gw, t, 'echo late > late.txt')).status).toBe('exited');
    await expectStatus(call(gw, 'POST', `${turn}/restore`, { json: { checkpoint: first.id } }), 200);
    // (The sandbox's mount points of the private .berth and .berth-inputs are no workspace files.)
    expect(onDisk(t.root).filter((p) => !p.startsWith('.berth'))).toEqual([]);
    await expectStatus(call(gw, 'POST', `${turn}/release`, { json: {} }), 200);
  });

  it.skipIf(!bwrap)('should see what a command changes right after a checkpoint of settled files, same size and mtime put back', { timeout: 120_000 }, async () => {
    const env = await createEnvironment(gw, tokens.alice);
    const t = await tenant(gw, tokens.alice, { environmentId: env });
    const turn = `/v1/sessions/${t.session}/turns/${t.turn}`;
    expect((await runInTurn(gw, t, 'mkdir d && printf AAAA > d/same && printf x > mode && printf gone > gone && ln -s old link')).status).toBe('exited');
    await new Promise((resolve) => setTimeout(resolve, 2_100)); // settled: the next capture records their stat hints
    const first = await takeCheckpoint(turn);
    // The same second, by a command: the old stats except ctime (same size, the mtime put back to the nanosecond).
    const script = 'touch -r d/same .ref && printf BBBB > d/same && touch -r .ref d/same && rm .ref && chmod 600 mode && rm gone && ln -sfn new link && mkdir empty';
    expect((await runInTurn(gw, t, script)).status).toBe('exited');
    const second = await takeCheckpoint(turn);
    const diff = await expectStatus(call(gw, 'GET', `/v1/workspaces/${t.workspace}/diff?from=${first.id}&to=${second.id}`), 200);
    expect(diff.changes.map((c: { path: string }) => c.path)).toEqual(['d/same', 'empty', 'gone', 'link', 'mode']);
    await expectStatus(call(gw, 'POST', `${turn}/release`, { json: {} }), 200);
  });
});
