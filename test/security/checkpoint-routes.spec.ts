/**
 * The checkpoint and view routes against a hostile member token (DESIGN §13), over HTTP through the real gateway on a
 * real socket: every route is not_found to bob for alice's workspace, session and turn; a checkpoint id alice's
 * workspace published is not_found through bob's (manifests are stored by content, so only the publishing stream
 * makes an id readable); malformed ids are refused while the request is parsed, before any lookup; a tree of 10,001
 * files made by a contained command is listed truncated in its tree and its diff while the server serves others.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapOrSkip } from '../integration/native-harness.ts';
import { createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus, letSandboxReach, q, runInTurn, tenant, type Answer, type Tenant } from '../integration/workspace-http.ts';

const SECRET = `CP-SECRET-${Math.random().toString(36).slice(2)}`;
/** The server's cap on the entries of one tree or diff answer (MAX_LISTED_ENTRIES). */
const LISTED = 10_000;
const bwrap = bwrapOrSkip();

let gw: RunningGateway;
beforeAll(async () => {
  gw = await startGateway();
  letSandboxReach(gw);
});
afterAll(() => gw?.close());

const turnPath = (t: Tenant) => `/v1/sessions/${t.session}/turns/${t.turn}`;
const checkpoint = async (t: Tenant) => (await expectStatus(call(gw, 'POST', `${turnPath(t)}/checkpoints`, { token: t.token }), 201)) as { id: string; revision: number };

describe("another tenant's checkpoints and view", () => {
  let alice: Tenant;
  let bob: Tenant;
  let published: { id: string; revision: number };
  let before: string;

  beforeAll(async () => {
    alice = await tenant(gw, tokens.alice);
    bob = await tenant(gw, tokens.bob);
    await expectStatus(call(gw, 'PUT', `${alice.files}${q('notes.txt')}`, { body: SECRET }), 200);
    published = await checkpoint(alice);
    await expectStatus(call(gw, 'PUT', `${bob.files}${q('mine.txt')}`, { token: tokens.bob, body: 'bob' }), 200);
    await checkpoint(bob);
    before = (await call(gw, 'GET', `/v1/workspaces/${alice.workspace}/history`)).text;
  });
  afterAll(async () => {
    // Nothing of hers moved: her history, her files, her checkpoints.
    expect((await call(gw, 'GET', `/v1/workspaces/${alice.workspace}/history`)).text).toBe(before);
    expect((await call(gw, 'GET', `${alice.files}${q('notes.txt')}`)).text).toBe(SECRET);
    expect((await expectStatus(call(gw, 'GET', `/v1/workspaces/${alice.workspace}/checkpoints`), 200)).map((c: { id: string }) => c.id)).toEqual([published.id]);
  });

  /** A not_found for bob naming nothing of alice's beyond what bob sent. */
  const hidden = async (what: string, request: string, answer: Promise<Answer>) => {
    const got = await answer;
    expect({ what, status: got.status, code: got.json.error?.code }).toEqual({ what, status: 404, code: 'not_found' });
    expect(got.text, what).not.toContain(SECRET);
    expect(got.text, what).not.toContain('alice');
    for (const id of [alice.workspace, alice.session, alice.turn, published.id]) if (!request.includes(id)) expect(got.text, `${what} names ${id}`).not.toContain(id);
  };

  it('should answer not_found to bob on every checkpoint and view route of her workspace, session and turn', async () => {
    const ws = `/v1/workspaces/${alice.workspace}`;
    const routes: Array<[string, string, unknown?]> = [
      ['GET', `${ws}/checkpoints`],
      ['GET', `${ws}/checkpoints/${published.id}`],
      ['GET', `${ws}/diff?from=${published.id}&to=${published.id}`],
      ['GET', `${ws}/mount`],
      ['POST', `${ws}/detach`],
      ['POST', `${turnPath(alice)}/checkpoints`],
      ['POST', `${turnPath(alice)}/restore`, { checkpoint: published.id }],
      // Her turn under his own session.
      ['POST', `/v1/sessions/${bob.session}/turns/${alice.turn}/checkpoints`],
      ['POST', `/v1/sessions/${bob.session}/turns/${alice.turn}/restore`, { checkpoint: published.id }],
    ];
    for (const [method, path, json] of routes) {
      await hidden(`${method} ${path}`, path + JSON.stringify(json ?? ''), call(gw, method, path, { token: tokens.bob, ...(json !== undefined ? { json } : {}) }));
    }
  });

  it('should answer not_found for her published checkpoint id through his own workspace and turn', async () => {
    const mine = `/v1/workspaces/${bob.workspace}`;
    const [own] = await expectStatus(call(gw, 'GET', `${mine}/checkpoints`, { token: tokens.bob }), 200);
    const request = published.id;
    await hidden('her id, his tree', request, call(gw, 'GET', `${mine}/checkpoints/${published.id}`, { token: tokens.bob }));
    await hidden('her id, his diff (from)', request, call(gw, 'GET', `${mine}/diff?from=${published.id}&to=${own.id}`, { token: tokens.bob }));
    await hidden('her id, his diff (to)', request, call(gw, 'GET', `${mine}/diff?from=${own.id}&to=${published.id}`, { token: tokens.bob }));
    await hidden('her id, his restore', request, call(gw, 'POST', `${turnPath(bob)}/restore`, { token: tokens.bob, json: { checkpoint: published.id } }));
    // His workspace kept its own files: nothing of hers was restored into it.
    expect((await expectStatus(call(gw, 'GET', `${bob.files}/list`, { token: tokens.bob }), 200)).entries.map((e: { name: string }) => e.name)).toEqual(['mine.txt']);
  });

  it('should refuse malformed ids while parsing the request (invalid_request, even on her workspace), before any lookup', async () => {
    const ws = `/v1/workspaces/${alice.workspace}`;
    const good = published.id;
    for (const bad of ['../../etc', '..%2F..%2Fetc', 'sha256:zz', `sha256:${'0'.repeat(63)}`, `sha256:${'0'.repeat(64)}/x`, `sha256:${'0'.repeat(900)}`]) {
      const shaped = [
        call(gw, 'GET', `${ws}/checkpoints/${encodeURIComponent(bad)}`, { token: tokens.bob }),
        call(gw, 'GET', `${ws}/diff?from=${encodeURIComponent(bad)}&to=${good}`, { token: tokens.bob }),
        call(gw, 'GET', `${ws}/diff?from=${good}&to=${encodeURIComponent(bad)}`, { token: tokens.bob }),
        call(gw, 'POST', `${turnPath(alice)}/restore`, { token: tokens.bob, json: { checkpoint: bad } }),
      ];
      for (const [i, answer] of (await Promise.all(shaped)).entries()) {
        // 400 to bob on her workspace: refused before the workspace was even looked up (else it would be not_found).
        expect({ bad: bad.slice(0, 20), i, status: answer.status, code: answer.json.error?.code, part: answer.json.error?.detail?.part }).toEqual({
          bad: bad.slice(0, 20),
          i,
          status: 400,
          code: 'invalid_request',
          part: ['params', 'query', 'query', 'body'][i],
        });
        expect(answer.text).not.toContain(bad.length > 40 ? bad : '\u0000'); // a long input is not echoed back
      }
    }
    // Past the router's 1024-byte parameter cap the router itself refuses it.
    const huge = `sha256:${'0'.repeat(5000)}`;
    expect((await expectError(call(gw, 'GET', `${ws}/checkpoints/${huge}`, { token: tokens.bob }), 400, 'invalid_request')).detail).toEqual({ reason: 'FST_ERR_MAX_PARAM_LENGTH' });
    await expectError(call(gw, 'GET', `${ws}/diff?from=${huge}&to=${good}`, { token: tokens.bob }), 400, 'invalid_request');
    await expectError(call(gw, 'POST', `${turnPath(alice)}/restore`, { token: tokens.bob, json: { checkpoint: 'x'.repeat(100_000) } }), 400, 'invalid_request');
  });
});

describe('a tree past the listed limit', () => {
  it.skipIf(!bwrap)('should list a tree of 10,001 files and its diff truncated at 10,000 entries, and serve others meanwhile', { timeout: 180_000 }, async () => {
    const env = await createEnvironment(gw, tokens.alice);
    const t = await tenant(gw, tokens.alice, { environmentId: env });
    const made = await runInTurn(gw, t, 'mkdir many && cd many && seq 10001 | xargs touch && ls | wc -l');
    expect(made).toEqual({ status: 'exited', output: '10001\n' });
    const big = await checkpoint(t); // many/ and its 10,001 files: 10,002 entries
    await expectStatus(call(gw, 'DELETE', `${t.files}${q('many', '&recursive=true')}`), 200);
    const empty = await checkpoint(t);
    const ws = `/v1/workspaces/${t.workspace}`;

    // Bob's requests while the big answers are built: each answered, and within seconds.
    const bobMs: number[] = [];
    const bobMeanwhile = (async () => {
      for (let i = 0; i < 10; i++) {
        const started = performance.now();
        await expectStatus(call(gw, 'GET', '/v1/workspaces', { token: tokens.bob }), 200);
        bobMs.push(performance.now() - started);
      }
    })();
    const [tree, diff, back] = await Promise.all([
      expectStatus(call(gw, 'GET', `${ws}/checkpoints/${big.id}`), 200),
      expectStatus(call(gw, 'GET', `${ws}/diff?from=${big.id}&to=${empty.id}`), 200),
      expectStatus(call(gw, 'GET', `${ws}/diff?from=${empty.id}&to=${big.id}`), 200),
    ]);
    await bobMeanwhile;

    expect(tree).toMatchObject({ id: big.id, files: 10_001, truncated: true });
    expect(tree.entries.length).toBe(LISTED);
    expect(tree.entries[0].path).toBe('many');
    expect(diff.truncated).toBe(true);
    expect(diff.changes.length).toBe(LISTED);
    expect(diff.changes.every((c: { after: unknown }) => c.after === null)).toBe(true);
    expect(back.changes.length).toBe(LISTED);
    expect(back.changes.every((c: { before: unknown }) => c.before === null)).toBe(true);
    // The small ones are not truncated.
    expect((await expectStatus(call(gw, 'GET', `${ws}/checkpoints/${empty.id}`), 200)).truncated).toBeUndefined();
    expect(bobMs.length).toBe(10);
    expect(Math.max(...bobMs)).toBeLessThan(5_000);
    await expectStatus(call(gw, 'POST', `${turnPath(t)}/release`, { json: {} }), 200);
  });
});
