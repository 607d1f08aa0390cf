/**
 * A member token trying to exhaust the server through the workspace routes (DESIGN §13), over HTTP through the real
 * gateway: a file body over the 64 MiB limit (declared, or chunked without end), turns opened and never released,
 * an edit whose text to replace is huge or occurs everywhere, a directory of 20,000 entries, a tree 200 levels deep
 * made by a contained command. Each is answered (typed, bounded, fast) and the other tenant is served meanwhile.
 */
import net from 'node:net';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bwrapOrSkip } from '../integration/native-harness.ts';
import { createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus, letSandboxReach, q, runInTurn, tenant, type Tenant } from '../integration/workspace-http.ts';

const MiB = 1024 * 1024;
const MAX_FILE = 64 * MiB;
const DISCARD_MS = 3000;
const bwrap = bwrapOrSkip();

let gw: RunningGateway;
beforeAll(async () => {
  gw = await startGateway({ limits: { discardMs: DISCARD_MS } });
  letSandboxReach(gw);
});
afterAll(() => gw?.close());

/** How long bob waits for his own workspace list: the server still serves the other tenant. */
async function bobServedMs(): Promise<number> {
  const started = performance.now();
  await expectStatus(call(gw, 'GET', '/v1/workspaces', { token: tokens.bob }), 200);
  return performance.now() - started;
}

const release = (t: Tenant) => expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { token: t.token, json: {} }), 200);

/**
 * PUTs a body over a raw socket: `declared` bytes in Content-Length with nothing sent after the head, or chunked
 * 256 KiB frames as fast as the socket takes them. Resolves with the answer's head and the body bytes sent by then.
 */
function putRaw(path: string, declared?: number): Promise<{ status: number; code: string | undefined; sentBeforeAnswer: number; ms: number }> {
  const { hostname, port } = new URL(gw.url);
  const head = [`PUT ${path} HTTP/1.1`, `Host: ${hostname}:${port}`, `Authorization: Bearer ${tokens.alice}`, 'Content-Type: application/octet-stream'];
  head.push(declared === undefined ? 'Transfer-Encoding: chunked' : `Content-Length: ${declared}`);
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = net.connect(Number(port), hostname);
    const frame = Buffer.concat([Buffer.from(`${(256 * 1024).toString(16)}\r\n`), Buffer.alloc(256 * 1024, 'z'), Buffer.from('\r\n')]);
    let sent = 0;
    let answer = '';
    let answered = false;
    const giveUp = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer after 60 s, ${sent} bytes sent`));
    }, 60_000);
    const pump = (): void => {
      while (!answered && declared === undefined) {
        sent += 256 * 1024;
        if (!socket.write(frame)) return void socket.once('drain', pump);
      }
    };
    socket.on('error', () => undefined); // the cut-off after the answer
    // Cut off with body bytes unread, the kernel resets the connection, which may eat the answer (as endless-body.spec.ts says).
    socket.once('close', () => {
      if (answered) return;
      answered = true;
      clearTimeout(giveUp);
      resolve({ status: 0, code: undefined, sentBeforeAnswer: sent, ms: performance.now() - started });
    });
    socket.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      const body = answer.indexOf('\r\n\r\n');
      if (answered || body < 0 || !/"code":"[a-z_]+"/.test(answer)) return;
      answered = true;
      clearTimeout(giveUp);
      resolve({ status: Number(answer.split(' ')[1]), code: /"code":"([a-z_]+)"/.exec(answer)?.[1], sentBeforeAnswer: sent, ms: performance.now() - started });
      socket.destroy();
    });
    socket.write(`${head.join('\r\n')}\r\n\r\n`);
    pump();
  });
}

describe('bodies over the file limit', () => {
  it('should answer a declared body over 64 MiB with file_too_large having read none of it, within the discard bound', async () => {
    const t = await tenant(gw, tokens.alice);
    for (const route of [`${t.files}${q('big.bin')}`, `${t.files}/inputs${q('big.bin')}`]) {
      const upload = putRaw(route, MAX_FILE + 1);
      // The answer waits (bounded) for a body the client never sends; bob is served meanwhile.
      const waited = await bobServedMs();
      const got = await upload;
      expect(got).toMatchObject({ status: 413, code: 'file_too_large', sentBeforeAnswer: 0 });
      expect(got.ms).toBeLessThan(DISCARD_MS + 2000);
      expect(waited).toBeLessThan(1000);
    }
    expect(readdirSync(t.root)).toEqual([]);
    await release(t);
  });

  it('should answer a chunked body past 64 MiB with file_too_large, reading at most the limit and the discard bound', { timeout: 90_000 }, async () => {
    const t = await tenant(gw, tokens.alice);
    const upload = putRaw(`${t.files}${q('big.bin')}`);
    const latencies: number[] = [];
    let done = false;
    void upload.finally(() => (done = true));
    while (!done) latencies.push(await bobServedMs());
    const got = await upload;
    if (got.status !== 0) expect(got).toMatchObject({ status: 413, code: 'file_too_large' });
    // Refused past the limit, then at most 64 MiB more thrown away (gateway discard) and what the kernel buffers.
    expect(got.sentBeforeAnswer).toBeGreaterThan(MAX_FILE);
    expect(got.sentBeforeAnswer).toBeLessThan(MAX_FILE + 64 * MiB + 32 * MiB);
    expect(Math.max(...latencies)).toBeLessThan(5000);
    expect(readdirSync(t.root)).toEqual([]); // no file, no temp file left
    expect(await bobServedMs()).toBeLessThan(2000);
    await release(t);
  });
});

describe('turns held without end', () => {
  it('should not keep another tenant from its own storage: many held turns and waiters of alice, bob opens, writes, releases', { timeout: 60_000 }, async () => {
    const held: Tenant[] = [];
    for (let i = 0; i < 40; i++) held.push(await tenant(gw, tokens.alice));
    // Waiters on her own held storages, each holding a request open meanwhile.
    const sessions = await Promise.all(held.slice(0, 10).map((h) => expectStatus(call(gw, 'POST', '/v1/sessions', { json: { workspaceId: h.workspace } }), 201)));
    const waiters = sessions.map((s) => call(gw, 'POST', `/v1/sessions/${s.id}/turns`, { json: { waitMs: 4000 } }));
    const started = performance.now();
    const bob = await tenant(gw, tokens.bob);
    await expectStatus(call(gw, 'PUT', `${bob.files}${q('mine.txt')}`, { token: tokens.bob, body: 'mine' }), 200);
    expect((await call(gw, 'GET', `${bob.files}${q('mine.txt')}`, { token: tokens.bob })).text).toBe('mine');
    await release(bob);
    expect(performance.now() - started).toBeLessThan(3000);
    // Her waiters end on their own, busy: her turns never gave way to her own second turns.
    for (const w of await Promise.all(waiters)) expect([w.status, w.json.error?.code]).toEqual([409, 'workspace_busy']);
    for (const h of held) await release(h);
  });
});

describe('edits that would take long', () => {
  it('should refuse fast an edit whose text to replace (about 1 MiB) is not in a small file', async () => {
    const t = await tenant(gw, tokens.alice);
    await expectStatus(call(gw, 'PUT', `${t.files}${q('small.txt')}`, { body: 'hello world\n' }), 200);
    const started = performance.now();
    const error = await expectError(call(gw, 'POST', `${t.files}/edit`, { json: { path: 'small.txt', old: 'x'.repeat(1_000_000), new: '' } }), 400, 'invalid_request');
    expect(error.detail.reason).toBe('old_text_missing');
    expect(performance.now() - started).toBeLessThan(1000);
    await release(t);
  });

  it('should refuse fast a text to replace that occurs everywhere (overlapping occurrences of a long text)', { timeout: 30_000 }, async () => {
    const t = await tenant(gw, tokens.alice);
    await expectStatus(call(gw, 'PUT', `${t.files}${q('same.txt')}`, { body: Buffer.alloc(8 * MiB, 'a') }), 200);
    const started = performance.now();
    const error = await expectError(call(gw, 'POST', `${t.files}/edit`, { json: { path: 'same.txt', old: 'a'.repeat(512 * 1024), new: 'b' } }), 400, 'invalid_request');
    // Counted up to 100: counting all 7.5 million overlapping ones would hold the server for hours.
    expect(error.detail).toMatchObject({ reason: 'old_text_not_unique', count: 100 });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(await bobServedMs()).toBeLessThan(1000);
    await release(t);
  });
});

describe('large and deep directories', () => {
  it('should page a directory of 20,000 entries (at most 1000 an answer) and refuse a larger page', { timeout: 60_000 }, async () => {
    const t = await tenant(gw, tokens.alice);
    mkdirSync(join(t.root, 'many'));
    for (let i = 0; i < 20_000; i++) writeFileSync(join(t.root, 'many', `f${String(i).padStart(5, '0')}`), '');
    expect((await expectError(call(gw, 'GET', `${t.files}/list${q('many', '&limit=5000')}`), 400, 'invalid_request')).message).toBeTruthy();
    const names: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await expectStatus(call(gw, 'GET', `${t.files}/list${q('many', cursor ? `&cursor=${encodeURIComponent(cursor)}` : '')}`), 200);
      expect(page.entries.length).toBeLessThanOrEqual(1000);
      names.push(...page.entries.map((e: { name: string }) => e.name));
      cursor = page.next;
      pages++;
    } while (cursor);
    expect(pages).toBe(20);
    expect(names).toHaveLength(20_000);
    expect(new Set(names).size).toBe(20_000);
    await release(t);
  });

  it.skipIf(!bwrap)('should answer a 200-level tree made by a command: release records it truncated, recursive remove refuses it, the server serves', { timeout: 90_000 }, async () => {
    const env = await createEnvironment(gw, tokens.alice);
    const t = await tenant(gw, tokens.alice, { environmentId: env });
    const made = await runInTurn(gw, t, 'i=0; while [ $i -lt 200 ]; do mkdir d && cd d || exit 1; i=$((i+1)); done; echo bottom > f; echo made');
    expect(made).toMatchObject({ status: 'exited' });
    expect(made.output).toContain('made');
    const started = performance.now();
    await release(t);
    expect(performance.now() - started).toBeLessThan(10_000);
    const history = await expectStatus(call(gw, 'GET', `/v1/workspaces/${t.workspace}/history`), 200);
    expect(history.at(-1)).toMatchObject({ tool: 'shell', truncated: true });

    const session = await expectStatus(call(gw, 'POST', '/v1/sessions', { json: { workspaceId: t.workspace } }), 201);
    const turn = await expectStatus(call(gw, 'POST', `/v1/sessions/${session.id}/turns`, { json: {} }), 201);
    const files = `/v1/sessions/${session.id}/turns/${turn.id}/files`;
    const removing = performance.now();
    const error = await expectError(call(gw, 'DELETE', `${files}${q('d', '&recursive=true')}`), 400, 'invalid_request');
    expect(error.detail.reason).toBe('tree_too_large');
    expect(performance.now() - removing).toBeLessThan(5000);
    expect(await bobServedMs()).toBeLessThan(1000);
    // Reachable to the tools component by component all the way down.
    expect((await call(gw, 'GET', `${files}${q(`${'d/'.repeat(200)}f`)}`)).text).toBe('bottom\n');
    await expectStatus(call(gw, 'POST', `/v1/sessions/${session.id}/turns/${turn.id}/release`, { json: {} }), 200);
    // The workspace itself still goes, tree and all.
    await expectStatus(call(gw, 'DELETE', `/v1/workspaces/${t.workspace}`), 204);
  });
});
