/**
 * The workspace, session and turn routes against a hostile member token (DESIGN §13), over HTTP through the real
 * gateway on a real socket: another tenant's workspace, session and turn are not_found whatever is tried (and the
 * answers name nothing of hers), every path spelling that climbs out is refused by every tool route, a link swapped
 * in by a real process during reads and writes never leaks or lands outside, `.berth` stays invisible, staged inputs
 * stay read-only to tools and to a contained command, which sees neither `.berth` nor the data directory, and bad or
 * stale session bindings and cwds are refused before anything runs.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../fixtures/wait-for.ts';
import { bwrapOrSkip } from '../integration/native-harness.ts';
import { createEnvironment, startGateway, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus, letSandboxReach, q, runInTurn, submitInTurn, tenant, type Answer, type Tenant } from '../integration/workspace-http.ts';
import { startSwapper } from '../fixtures/link-swapper.ts';

const SECRET = `WS-SECRET-${Math.random().toString(36).slice(2)}`;
const bwrap = bwrapOrSkip();

let gw: RunningGateway;
/** A host directory outside every workspace, holding the secret; links point into it. */
let outside: string;

beforeAll(async () => {
  gw = await startGateway();
  letSandboxReach(gw);
  outside = mkdtempSync(join(tmpdir(), 'berth-ws-outside-'));
  writeFileSync(join(outside, 'secret'), SECRET);
});
afterAll(async () => {
  await gw?.close();
  rmSync(outside, { recursive: true, force: true });
});

const outsideUntouched = () => {
  expect(readdirSync(outside)).toEqual(['secret']);
  expect(readFileSync(join(outside, 'secret'), 'utf8')).toBe(SECRET);
};

/** Every file tool route of a turn, called on one path with one token. */
const toolRoutes = (t: Tenant, path: string, token = t.token): Record<string, () => Promise<Answer>> => ({
  read: () => call(gw, 'GET', `${t.files}${q(path)}`, { token }),
  write: () => call(gw, 'PUT', `${t.files}${q(path, '&parents=true')}`, { token, body: 'pwned' }),
  edit: () => call(gw, 'POST', `${t.files}/edit`, { token, json: { path, old: SECRET, new: 'pwned' } }),
  list: () => call(gw, 'GET', `${t.files}/list${q(path)}`, { token }),
  stat: () => call(gw, 'GET', `${t.files}/stat${q(path)}`, { token }),
  mkdir: () => call(gw, 'POST', `${t.files}/mkdir`, { token, json: { path, parents: true } }),
  remove: () => call(gw, 'DELETE', `${t.files}${q(path, '&recursive=true')}`, { token }),
  stage: () => call(gw, 'PUT', `${t.files}/inputs${q(path)}`, { token, body: 'pwned' }),
});

/** Everything under `dir` (paths and file bytes), to compare before and after an attack. */
function tree(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = `${prefix}${entry.name}`;
    if (entry.isDirectory()) out.push(`${path}/`, ...tree(join(dir, entry.name), `${path}/`));
    else out.push(entry.isFile() ? `${path}=${readFileSync(join(dir, entry.name), 'utf8')}` : `${path}@`);
  }
  return out.sort();
}

describe('another tenant\'s workspace, session and turn', () => {
  let alice: Tenant;
  let aliceIds: string[];
  let before: { tree: string[]; history: number };

  beforeAll(async () => {
    alice = await tenant(gw, tokens.alice);
    aliceIds = [alice.workspace, alice.session, alice.turn];
    await expectStatus(call(gw, 'PUT', `${alice.files}${q('notes.txt')}`, { body: SECRET }), 200);
    before = { tree: tree(dirname(alice.root)), history: (await expectStatus(call(gw, 'GET', `/v1/workspaces/${alice.workspace}/history`), 200)).length };
  });

  /** A not_found for bob that names none of alice's resources beyond what bob put in the request. */
  const hidden = async (what: string, request: string, answer: Promise<Answer>, status = 404, code = 'not_found') => {
    const got = await answer;
    expect({ what, status: got.status, code: got.json.error?.code }).toEqual({ what, status, code });
    expect(got.text, what).not.toContain('alice');
    expect(got.text, what).not.toContain(SECRET);
    for (const id of aliceIds) if (!request.includes(id)) expect(got.text, `${what} names ${id}`).not.toContain(id);
  };

  it('should answer not_found to bob for her workspace, its history and its deletion', async () => {
    for (const [method, path] of [
      ['GET', `/v1/workspaces/${alice.workspace}`],
      ['DELETE', `/v1/workspaces/${alice.workspace}`],
      ['GET', `/v1/workspaces/${alice.workspace}/history`],
    ] as const) {
      await hidden(`${method} ${path}`, path, call(gw, method, path, { token: tokens.bob }));
    }
    const listed = await expectStatus(call(gw, 'GET', '/v1/workspaces', { token: tokens.bob }), 200);
    expect(JSON.stringify(listed)).not.toContain(alice.workspace);
  });

  it('should answer not_found to bob for her session and turn, and to every file tool through her turn', async () => {
    const turn = `/v1/sessions/${alice.session}/turns/${alice.turn}`;
    await hidden('GET session', alice.session, call(gw, 'GET', `/v1/sessions/${alice.session}`, { token: tokens.bob }));
    await hidden('DELETE session', alice.session, call(gw, 'DELETE', `/v1/sessions/${alice.session}`, { token: tokens.bob }));
    await hidden('open turn', alice.session, call(gw, 'POST', `/v1/sessions/${alice.session}/turns`, { token: tokens.bob, json: { waitMs: 0 } }));
    await hidden('GET turn', turn, call(gw, 'GET', turn, { token: tokens.bob }));
    await hidden('release', turn, call(gw, 'POST', `${turn}/release`, { token: tokens.bob, json: {} }));
    for (const [tool, route] of Object.entries(toolRoutes(alice, 'notes.txt', tokens.bob))) await hidden(tool, turn, route());
    // Her turn named under bob's own session: still not his.
    const mine = await tenant(gw, tokens.bob);
    await hidden('her turn under his session', alice.turn, call(gw, 'GET', `/v1/sessions/${mine.session}/turns/${alice.turn}/files${q('notes.txt')}`, { token: tokens.bob }));
    await expectStatus(call(gw, 'POST', `/v1/sessions/${mine.session}/turns/${mine.turn}/release`, { token: tokens.bob, json: {} }), 200);
  });

  it('should refuse bob an execution in her session and turn, and a session bound to her workspace', async () => {
    const env = await createEnvironment(gw, tokens.bob);
    const op = () => `bob-${Math.random()}`;
    const json = { operationId: op(), session: alice.session, turn: alice.turn, command: `echo pwned > /workspace/notes.txt` };
    await hidden('exec in her turn', JSON.stringify(json), call(gw, 'POST', '/v1/executions', { token: tokens.bob, json }));
    const withEnv = { operationId: op(), environment: env, turn: alice.turn, command: 'true' };
    expect((await expectError(call(gw, 'POST', '/v1/executions', { token: tokens.bob, json: withEnv }), 400, 'invalid_request')).detail).toEqual({ reason: 'turn_without_session' });
    const bound = { workspaceId: alice.workspace };
    await hidden('session on her workspace', alice.workspace, call(gw, 'POST', '/v1/sessions', { token: tokens.bob, json: bound }));
    await hidden('child of her session', alice.session, call(gw, 'POST', '/v1/sessions', { token: tokens.bob, json: { parentId: alice.session, relation: 'child' } }));
  });

  it('should answer forbidden to a member\'s clear, even of its own workspace, and not_found to guessed ids', async () => {
    const clear = `/v1/workspaces/${alice.workspace}/holder/clear`;
    await hidden('clear as bob', clear, call(gw, 'POST', clear, { token: tokens.bob }), 403, 'forbidden');
    expect((await expectError(call(gw, 'POST', clear), 403, 'forbidden')).detail).toEqual({ role: 'member' });
    const guesses = { ws: `hwsp_${'0'.repeat(32)}`, session: `hses_${'0'.repeat(32)}`, turn: `htrn_${'0'.repeat(32)}` };
    for (const path of [
      `/v1/workspaces/${guesses.ws}`,
      `/v1/workspaces/${guesses.ws}/history`,
      `/v1/sessions/${guesses.session}/turns/${guesses.turn}`,
      `/v1/sessions/${alice.session}/turns/${guesses.turn}/files${q('notes.txt')}`,
      `/v1/workspaces/not-a-workspace-id`,
    ]) {
      await hidden(`guess ${path}`, path, call(gw, 'GET', path, { token: tokens.bob }));
    }
  });

  afterAll(async () => {
    // Nothing of hers changed: her files, her history, her turn still open and holding.
    expect(tree(dirname(alice.root))).toEqual(before.tree);
    expect((await expectStatus(call(gw, 'GET', `/v1/workspaces/${alice.workspace}/history`), 200)).length).toBe(before.history);
    expect((await expectStatus(call(gw, 'GET', `/v1/workspaces/${alice.workspace}`), 200)).holder.turnId).toBe(alice.turn);
    await expectStatus(call(gw, 'POST', `/v1/sessions/${alice.session}/turns/${alice.turn}/release`, { json: {} }), 200);
  });
});

describe('path attacks against every tool route', () => {
  let t: Tenant;
  let home: () => string[];
  beforeAll(async () => {
    t = await tenant(gw, tokens.alice);
    // Canaries beside the root (in the workspace's home) and at the top of the data directory.
    writeFileSync(join(dirname(t.root), 'canary'), SECRET);
    writeFileSync(join(gw.dataDir, 'canary'), SECRET);
    await expectStatus(call(gw, 'PUT', `${t.files}${q('a/inside.txt', '&parents=true')}`, { body: 'inside' }), 200);
    const snapshot = tree(dirname(t.root));
    home = () => {
      expect(tree(dirname(t.root))).toEqual(snapshot);
      expect(readFileSync(join(gw.dataDir, 'canary'), 'utf8')).toBe(SECRET);
      return snapshot;
    };
  });
  afterAll(() => expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { json: {} }), 200));

  const spellings: Array<[string, string]> = [
    ['..', 'parent_segment'],
    ['a/../../canary', 'parent_segment'],
    ['../canary', 'parent_segment'],
    ['../../canary', 'parent_segment'],
    ['/etc/passwd', 'absolute_path'],
    ['a\0b', 'nul_byte'],
    ['a/inside.txt\0.png', 'nul_byte'],
    ['..\\canary', 'backslash'],
    ['a//inside.txt', 'empty_segment'],
    ['C:/canary', 'drive_letter'],
    [`a/${'n'.repeat(256)}`, 'name_too_long'],
  ];
  for (const [path, reason] of spellings) {
    it(`${JSON.stringify(path.slice(0, 40))}: invalid_request ${reason} from every route, nothing touched`, async () => {
      for (const [tool, route] of Object.entries(toolRoutes(t, path))) {
        const got = await route();
        expect({ tool, status: got.status, code: got.json.error?.code, reason: got.json.error?.detail?.reason }).toEqual({ tool, status: 400, code: 'invalid_request', reason });
      }
      home();
    });
  }

  it('a path past 4096 bytes is refused by every route before it is walked', async () => {
    const long = 'd/'.repeat(2100) + 'f';
    for (const [tool, route] of Object.entries(toolRoutes(t, long))) {
      const got = await route();
      expect({ tool, status: got.status, code: got.json.error?.code }).toEqual({ tool, status: 400, code: 'invalid_request' });
    }
    home();
  });

  it('percent-encodings in the query decode once: `..` spelled %2e%2e is refused; a double encoding is a literal name inside', async () => {
    const routes = (raw: string) => ({
      read: () => call(gw, 'GET', `${t.files}?path=${raw}`),
      write: () => call(gw, 'PUT', `${t.files}?path=${raw}&parents=true`, { body: 'pwned' }),
      list: () => call(gw, 'GET', `${t.files}/list?path=${raw}`),
      stat: () => call(gw, 'GET', `${t.files}/stat?path=${raw}`),
      remove: () => call(gw, 'DELETE', `${t.files}?path=${raw}&recursive=true`),
      stage: () => call(gw, 'PUT', `${t.files}/inputs?path=${raw}`, { body: 'pwned' }),
    });
    const encoded: Array<[string, string]> = [
      ['%2e%2e', 'parent_segment'],
      ['%2E%2E%2fcanary', 'parent_segment'],
      ['..%2f..%2fcanary', 'parent_segment'],
      ['a%2f%2e%2e%2f%2e%2e%2fcanary', 'parent_segment'],
      ['%2fetc%2fpasswd', 'absolute_path'],
      ['a%00b', 'nul_byte'],
      ['%5c..%5ccanary', 'backslash'],
    ];
    for (const [raw, reason] of encoded) {
      for (const [tool, route] of Object.entries(routes(raw))) {
        const got = await route();
        expect({ raw, tool, status: got.status, reason: got.json.error?.detail?.reason }).toEqual({ raw, tool, status: 400, reason });
      }
    }
    // Two paths in one query: refused, not one of them picked.
    for (const [tool, route] of Object.entries(routes('a/inside.txt&path=../canary'))) {
      const got = await route();
      expect({ tool, status: got.status, code: got.json.error?.code }).toEqual({ tool, status: 400, code: 'invalid_request' });
    }
    home();
    // Decoded once only: %252e%252e is the literal name `%2e%2e`, made inside the root and nowhere else.
    await expectStatus(call(gw, 'PUT', `${t.files}?path=%252e%252e%252fcanary`, { body: 'literal' }), 200);
    expect(readFileSync(join(t.root, '%2e%2e%2fcanary'), 'utf8')).toBe('literal');
    expect(readFileSync(join(dirname(t.root), 'canary'), 'utf8')).toBe(SECRET);
    await expectStatus(call(gw, 'DELETE', `${t.files}${q('%2e%2e%2fcanary')}`), 200);
    home();
  });

  it('`.berth` on disk is not listed and is not_found to every tool; `.berth-inputs` is read-only to tools', async () => {
    mkdirSync(join(t.root, '.berth'));
    writeFileSync(join(t.root, '.berth', 'secret'), SECRET);
    const listed = await expectStatus(call(gw, 'GET', `${t.files}/list`), 200);
    expect(listed.entries.map((e: { name: string }) => e.name)).not.toContain('.berth');
    for (const path of ['.berth', '.berth/secret', './.berth/secret', '.berth/new/x']) {
      for (const [tool, route] of Object.entries(toolRoutes(t, path))) {
        const got = await route();
        expect({ path, tool, status: got.status, code: got.json.error?.code }).toEqual({ path, tool, status: 404, code: 'not_found' });
        expect(got.text).not.toContain(SECRET);
      }
    }
    expect(readdirSync(join(t.root, '.berth'))).toEqual(['secret']);
    expect(readFileSync(join(t.root, '.berth', 'secret'), 'utf8')).toBe(SECRET);

    const staged = await expectStatus(call(gw, 'PUT', `${t.files}/inputs${q('in.txt')}`, { body: 'input' }), 200);
    expect(staged).toMatchObject({ path: '.berth-inputs/in.txt', size: 5 });
    expect((await call(gw, 'GET', `${t.files}${q('.berth-inputs/in.txt')}`)).text).toBe('input');
    expect((await expectStatus(call(gw, 'GET', `${t.files}/list${q('.berth-inputs')}`), 200)).entries.map((e: { name: string }) => e.name)).toEqual(['in.txt']);
    for (const path of ['.berth-inputs', '.berth-inputs/in.txt', '.berth-inputs/new', './.berth-inputs/in.txt', '.berth-inputs/sub/x']) {
      const routes = toolRoutes(t, path);
      for (const tool of ['write', 'edit', 'mkdir', 'remove'] as const) {
        const got = await routes[tool]();
        expect({ path, tool, status: got.status, reason: got.json.error?.detail?.reason }).toEqual({ path, tool, status: 400, reason: 'read_only_path' });
      }
    }
    const inputs = join(dirname(t.root), 'stage', '.berth-inputs');
    expect(readdirSync(inputs)).toEqual(['in.txt']);
    expect(readFileSync(join(inputs, 'in.txt'), 'utf8')).toBe('input');
    rmSync(join(t.root, '.berth'), { recursive: true });
  });
});

describe('a link swapped in by a real process while the gateway reads and writes', () => {
  let t: Tenant;
  let swapper: ChildProcess | undefined;
  beforeEach(async () => {
    t = await tenant(gw, tokens.alice);
  });
  afterEach(async () => {
    if (swapper?.pid) process.kill(swapper.pid, 'SIGKILL');
    swapper = undefined;
    await expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { json: {} }), 200);
  });

  const swapping = async (dir: string, loop: string): Promise<void> => {
    swapper = await startSwapper(dir, loop);
  };

  /** GETs and PUTs of `path` through the gateway: no answer ever carries the secret; what happened, counted. */
  const hammer = async (path: string, rounds: number): Promise<Map<string, number>> => {
    const outcomes = new Map<string, number>();
    const note = (what: string, got: Answer) => {
      expect(got.text, what).not.toContain(SECRET);
      const key = got.status === 200 ? `${what} ok` : `${what} ${got.json.error.code} ${got.json.error.detail?.reason ?? ''}`;
      outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
    };
    for (let i = 0; i < rounds; i++) {
      note('read', await call(gw, 'GET', `${t.files}${q(path)}`));
      note('write', await call(gw, 'PUT', `${t.files}${q(path)}`, { body: `write ${i}` }));
      note('edit', await call(gw, 'POST', `${t.files}/edit`, { json: { path, old: 'i', new: 'i' } }));
    }
    return outcomes;
  };

  it('a directory component flipping between a real directory and a link to a host directory', { timeout: 90_000 }, async () => {
    mkdirSync(join(t.root, 'real'));
    writeFileSync(join(t.root, 'real', 'secret'), 'inside');
    symlinkSync(outside, join(t.root, 'link'));
    await swapping(
      t.root,
      `quietly(() => fs.renameSync(p('real'), p('d'))); quietly(() => fs.renameSync(p('d'), p('real')));
       quietly(() => fs.renameSync(p('link'), p('d'))); quietly(() => fs.renameSync(p('d'), p('link')));`,
    );
    const outcomes = await hammer('d/secret', 300);
    process.kill(swapper!.pid!, 'SIGKILL');
    outsideUntouched();
    // Both sides of the race were met: the real directory used, the link refused.
    expect([...outcomes.keys()].filter((k) => k.endsWith(' ok')).length, JSON.stringify([...outcomes])).toBeGreaterThan(0);
    expect([...outcomes.keys()].some((k) => k.endsWith('invalid_request symlink')), JSON.stringify([...outcomes])).toBe(true);
  });

  it('the file itself flipping between a regular file and a link to the host secret', { timeout: 90_000 }, async () => {
    mkdirSync(join(t.root, 'd'));
    await swapping(
      join(t.root, 'd'),
      `quietly(() => fs.unlinkSync(p('f'))); quietly(() => fs.symlinkSync(${JSON.stringify(join(outside, 'secret'))}, p('f')));
       quietly(() => fs.unlinkSync(p('f'))); quietly(() => fs.writeFileSync(p('f'), 'inside', { flag: 'wx' }));`,
    );
    const outcomes = await hammer('d/f', 300);
    process.kill(swapper!.pid!, 'SIGKILL');
    outsideUntouched();
    expect([...outcomes.keys()].filter((k) => k.endsWith(' ok')).length, JSON.stringify([...outcomes])).toBeGreaterThan(0);
    expect([...outcomes.keys()].some((k) => k.endsWith('invalid_request symlink')), JSON.stringify([...outcomes])).toBe(true);
  });
});

describe('session bindings and cwds', () => {
  it('should refuse a session cwd that climbs out, is absolute or holds a NUL, at creation', async () => {
    const ws = (await expectStatus(call(gw, 'POST', '/v1/workspaces', { json: {} }), 201)).id;
    for (const [cwd, reason] of [
      ['../..', 'parent_segment'],
      ['a/../../..', 'parent_segment'],
      ['/etc', 'absolute_path'],
      ['a\0b', 'nul_byte'],
      ['a\\..', 'backslash'],
    ]) {
      const error = await expectError(call(gw, 'POST', '/v1/sessions', { json: { workspaceId: ws, cwd } }), 400, 'invalid_request');
      expect({ cwd, reason: error.detail.reason }).toEqual({ cwd, reason });
    }
    expect((await expectError(call(gw, 'POST', '/v1/sessions', { json: { cwd: 'src' } }), 400, 'invalid_request')).detail.reason).toBe('cwd_without_workspace');
  });

  it('should refuse a turn, a file call and a command once the workspace or the session is gone', async () => {
    const t = await tenant(gw, tokens.alice);
    // The session deleted under an open turn: nothing new runs in it.
    await expectStatus(call(gw, 'DELETE', `/v1/sessions/${t.session}`), 204);
    await expectError(call(gw, 'PUT', `${t.files}${q('late.txt')}`, { body: 'late' }), 404, 'not_found');
    await expectError(submitInTurn(gw, t, 'echo late > /workspace/late-shell.txt'), 404, 'not_found');
    await expectError(call(gw, 'POST', `/v1/sessions/${t.session}/turns`, { json: {} }), 404, 'not_found');
    // Its turn still releases, and gives the storage back.
    await expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { json: {} }), 200);
    expect((await expectStatus(call(gw, 'GET', `/v1/workspaces/${t.workspace}`), 200)).holder).toBeNull();
    expect(readdirSync(t.root)).toEqual([]);

    // The workspace deleted under a bound session: its turn is refused before anything is claimed.
    const bound = await expectStatus(call(gw, 'POST', '/v1/sessions', { json: { workspaceId: t.workspace } }), 201);
    await expectStatus(call(gw, 'DELETE', `/v1/workspaces/${t.workspace}`), 204);
    expect((await expectError(call(gw, 'POST', `/v1/sessions/${bound.id}/turns`, { json: {} }), 409, 'workspace_unavailable')).detail.reason).toBe('deleted');
    // Its directory goes with it (an effect that runs after the deletion is recorded).
    await waitFor(async () => existsSync(dirname(t.root)), { until: (exists) => !exists, timeoutMs: 10_000, what: 'the deleted workspace\'s directory to go' });
  });
});

describe.skipIf(!bwrap)('a contained shell command in a turn', () => {
  let t: Tenant;
  const TOKEN = `fake-token-${Math.random().toString(36).slice(2)}`;
  beforeAll(async () => {
    const env = await createEnvironment(gw, tokens.alice);
    t = await tenant(gw, tokens.alice, { environmentId: env });
  });
  afterAll(() => expectStatus(call(gw, 'POST', `/v1/sessions/${t.session}/turns/${t.turn}/release`, { json: {} }), 200));

  it('cannot write the staged inputs, read `.berth`, or see the data directory', { timeout: 60_000 }, async () => {
    await expectStatus(call(gw, 'PUT', `${t.files}/inputs${q('in.txt')}`, { body: 'input' }), 200);
    mkdirSync(join(t.root, '.berth'), { mode: 0o755 });
    writeFileSync(join(t.root, '.berth', 'secret'), SECRET, { mode: 0o644 });
    writeFileSync(join(gw.dataDir, 'tokens.json'), JSON.stringify([{ token: TOKEN }]), { mode: 0o644 });
    const script = [
      'cat /workspace/.berth-inputs/in.txt; echo',
      'echo x > /workspace/.berth-inputs/x',
      'echo y > /workspace/.berth-inputs/in.txt',
      'rm -f /workspace/.berth-inputs/in.txt',
      'cat /workspace/.berth/secret',
      'ls -A /workspace/.berth',
      `ls -A ${gw.dataDir} ${gw.dataDir}/workspaces`,
      `cat ${gw.dataDir}/tokens.json`,
      `cat /workspace/../..${gw.dataDir}/tokens.json`,
      `ln -s ${gw.dataDir} /workspace/to-data; cat /workspace/to-data/tokens.json`,
      'echo done',
    ].join('; ');
    const { status, output } = await runInTurn(gw, t, script);
    expect(status).toBe('exited');
    expect(output).toContain('input\n');
    expect(output).toContain('done');
    expect(output).not.toContain(SECRET);
    expect(output).not.toContain(TOKEN);
    expect(output).not.toContain(t.workspace); // the data directory's listing of workspaces
    const inputs = join(dirname(t.root), 'stage', '.berth-inputs');
    expect(readdirSync(inputs)).toEqual(['in.txt']);
    expect(readFileSync(join(inputs, 'in.txt'), 'utf8')).toBe('input');
    expect(readFileSync(join(t.root, '.berth', 'secret'), 'utf8')).toBe(SECRET);
  });

  it('refuses a cwd that climbs out, or goes through a link the command planted, before anything runs', { timeout: 60_000 }, async () => {
    const planted = await runInTurn(gw, t, `mkdir -p /workspace/sub; ln -s /etc /workspace/lnk; ln -s .. /workspace/sub/up; ln -s ${outside} /workspace/out`);
    expect(planted.status).toBe('exited');
    const marker = 'touch /workspace/ran; touch ran-here';
    for (const [cwd, code, status] of [
      ['..', 'invalid_request', 400],
      ['sub/../..', 'invalid_request', 400],
      ['/etc', 'invalid_request', 400],
      ['a\0b', 'invalid_request', 400],
      ['lnk', 'invalid_request', 400],
      ['sub/up', 'invalid_request', 400],
      ['out', 'invalid_request', 400],
      ['sub/up/sub', 'invalid_request', 400],
    ] as const) {
      const error = await expectError(submitInTurn(gw, t, marker, { cwd }), status, code);
      expect(JSON.stringify(error)).not.toContain(SECRET);
    }
    expect(existsSync(join(t.root, 'ran'))).toBe(false);
    expect(readdirSync(join(t.root, 'sub'))).toEqual(['up']);
    outsideUntouched();
    // The same command in a real directory runs: the refusals above were the cwd's.
    expect((await runInTurn(gw, t, marker, { cwd: 'sub' })).status).toBe('exited');
    expect(existsSync(join(t.root, 'ran'))).toBe(true);
    expect(existsSync(join(t.root, 'sub', 'ran-here'))).toBe(true);
  });
});
