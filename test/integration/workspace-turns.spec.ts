/**
 * Workspaces and tool turns over the real runtime (startBerth on a temporary data directory, SQLite, the native
 * provider): managed and directory workspaces, turns that serialize per storage and overlap across storages, file
 * tools with byte versions, the file history, refusals before anything is claimed, release rules and the admin clear.
 */
import { chmodSync, chownSync, mkdirSync, readFileSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import { WAITERS_PER_SCOPE } from '../../src/runtime/workspaces/turn-service.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { defaultRolePolicy, type ScopeQuotas } from '../../src/runtime/role-policy.ts';

const alice: Caller = { scope: 'alice', role: 'member' };
const bob: Caller = { scope: 'bob', role: 'member' };
const admin: Caller = { scope: '*', role: 'admin' };

let dir: string;
let roots: string;
let berth: Berth;

async function start(mappings = [{ scope: 'alice', storageId: 'repo', root: join(roots, 'repo') }], quotas: Partial<ScopeQuotas> = {}): Promise<Berth> {
  const dataDir = join(dir, 'data');
  return startBerth({
    settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_workspaces',
    providers: [new NativeProvider({ dataDir })],
    workspaceRoots: mappings,
    policy: { ceilings: defaultRolePolicy.ceilings, quotas: { ...defaultRolePolicy.quotas, ...quotas } },
  });
}

beforeEach(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-ws-')));
  // Contained commands run as the sandbox identity, which must reach the data directory (as `./.berth` would be).
  chmodSync(dir, 0o755);
  roots = join(dir, 'roots');
  mkdirSync(join(roots, 'repo', 'src'), { recursive: true });
  mkdirSync(join(roots, 'other'), { recursive: true });
  berth = await start();
});

afterEach(async () => {
  await berth?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('workspaces and turns', () => {
  it('a managed workspace: turn, write, read with version, stale write refused, history recorded', async () => {
    const api = berth.api;
    const ws = await api.createWorkspace(alice, { name: 'task' });
    expect(ws).toMatchObject({ kind: 'managed', generation: 1, holder: null });
    const session = await api.createSession(alice, { workspaceId: ws.id });
    const turn = await api.openTurn(alice, session.id);
    expect((await api.getWorkspace(alice, ws.id)).holder?.turnId).toBe(turn.id);
    const w1 = await api.files.write(alice, session.id, turn.id, 'a.txt', Buffer.from('one'));
    const read = await api.files.read(alice, session.id, turn.id, 'a.txt');
    expect(read.data.toString()).toBe('one');
    expect(read.version).toBe(w1.version);
    await api.files.write(alice, session.id, turn.id, 'a.txt', Buffer.from('two'), { ifMatch: w1.version });
    await expect(api.files.write(alice, session.id, turn.id, 'a.txt', Buffer.from('three'), { ifMatch: w1.version })).rejects.toMatchObject({ code: 'stale_version' });
    expect((await api.files.read(alice, session.id, turn.id, 'a.txt')).data.toString()).toBe('two');
    await api.files.edit(alice, session.id, turn.id, 'a.txt', 'tw', 'TW');
    await api.releaseTurn(alice, session.id, turn.id);
    const history = await api.workspaceHistory(alice, ws.id);
    expect(history.items.map((h) => [h.tool, h.changes[0]!.path, h.turnId])).toEqual([
      ['write', 'a.txt', turn.id],
      ['write', 'a.txt', turn.id],
      ['edit', 'a.txt', turn.id],
    ]);
    expect(history.items[1]!.changes[0]!.before!.hash).toBe(w1.version);
    // A released turn admits nothing and is never reopened.
    await expect(api.files.read(alice, session.id, turn.id, 'a.txt')).rejects.toMatchObject({ code: 'invalid_state' });
    expect((await api.releaseTurn(alice, session.id, turn.id)).state).toBe('released');
  });

  it('two turns on one storage serialize; on two storages they overlap', async () => {
    const api = berth.api;
    const [a, b] = [await api.createWorkspace(alice, {}), await api.createWorkspace(alice, {})];
    const [s1, s2, s3] = [
      await api.createSession(alice, { workspaceId: a.id }),
      await api.createSession(alice, { workspaceId: a.id }),
      await api.createSession(alice, { workspaceId: b.id }),
    ];
    const t1 = await api.openTurn(alice, s1.id);
    await expect(api.openTurn(alice, s2.id)).rejects.toMatchObject({ code: 'workspace_busy', detail: { reason: 'held' } });
    const t3 = await api.openTurn(alice, s3.id); // another storage: not blocked
    const waiting = api.openTurn(alice, s2.id, { waitMs: 10_000 });
    const releasedAt = Date.now();
    await api.releaseTurn(alice, s1.id, t1.id);
    const t2 = await waiting;
    expect(t2.createdAt).toBeGreaterThanOrEqual(releasedAt - 5);
    await api.releaseTurn(alice, s2.id, t2.id);
    await api.releaseTurn(alice, s3.id, t3.id);
  });

  it('opening on a free storage claims it and records the turn in one commit; of racing opens one holds, the others burn their turn', async () => {
    const api = berth.api;
    let store = berth.runtime.store as unknown as { inner?: unknown; stats?: { commits: number } };
    while (store.inner) store = store.inner as typeof store;
    const ws = await api.createWorkspace(alice, {});
    const sessions = [await api.createSession(alice, { workspaceId: ws.id }), await api.createSession(alice, { workspaceId: ws.id })];
    const before = store.stats!.commits;
    const turn = await api.openTurn(alice, sessions[0]!.id);
    expect(store.stats!.commits - before).toBe(1);
    expect((await api.getWorkspace(alice, ws.id)).holder?.turnId).toBe(turn.id);
    await api.releaseTurn(alice, sessions[0]!.id, turn.id);

    // Both see the storage free and claim it together: exactly one holds it; the other's turn is released at once.
    const raced = await Promise.allSettled(sessions.map((s) => api.openTurn(alice, s.id)));
    const won = raced.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    expect(won).toHaveLength(1);
    expect(raced.find((r) => r.status === 'rejected')).toMatchObject({ reason: { code: 'workspace_busy' } });
    expect((await api.getWorkspace(alice, ws.id)).holder?.turnId).toBe(won[0]!.id);
    const lost = sessions.find((s) => s.id !== won[0]!.sessionId)!;
    const burned = (await berth.runtime.store.readAll()).filter((e) => e.type === 'turn.opened' && (e.data as { sessionId: string }).sessionId === lost.id);
    expect(burned).toHaveLength(1);
    expect((await api.getTurn(alice, lost.id, burned[0]!.stream.slice('turn-'.length))).state).toBe('released');

    // A loser that would wait opens a fresh turn, and holds once the winner lets go.
    await api.releaseTurn(alice, won[0]!.sessionId, won[0]!.id);
    const racing = sessions.map((s) => api.openTurn(alice, s.id, { waitMs: 10_000 }));
    const first = await Promise.race(racing);
    await api.releaseTurn(alice, first.sessionId, first.id);
    const second = await racing[sessions.findIndex((s) => s.id !== first.sessionId)]!;
    expect(second).toMatchObject({ state: 'open' });
    expect((await api.getWorkspace(alice, ws.id)).holder?.turnId).toBe(second.id);
    await api.releaseTurn(alice, second.sessionId, second.id);
  });

  it('refuses before claiming: missing and linked session directories, wrong generation, deleted session, other scope', async () => {
    const api = berth.api;
    const ws = await api.createWorkspace(alice, {});
    const missing = await api.createSession(alice, { workspaceId: ws.id, cwd: 'nope' });
    await expect(api.openTurn(alice, missing.id)).rejects.toMatchObject({ code: 'workspace_unavailable', detail: { reason: 'session_directory_missing' } });
    // A link as the session directory (planted as a command would).
    const root = join(dir, 'data', 'workspaces', ws.id, 'root');
    symlinkSync('/etc', join(root, 'linked'));
    const linked = await api.createSession(alice, { workspaceId: ws.id, cwd: 'linked' });
    await expect(api.openTurn(alice, linked.id)).rejects.toMatchObject({ code: 'workspace_unavailable', detail: { reason: 'session_directory_link' } });
    expect((await api.getWorkspace(alice, ws.id)).holder).toBeNull();
    const deleted = await api.createSession(alice, { workspaceId: ws.id });
    await api.deleteSession(alice, deleted.id);
    await expect(api.openTurn(alice, deleted.id)).rejects.toMatchObject({ code: 'not_found' });
    const session = await api.createSession(alice, { workspaceId: ws.id });
    await expect(api.openTurn(bob, session.id)).rejects.toMatchObject({ code: 'not_found' });
    const turn = await api.openTurn(alice, session.id);
    await expect(api.getTurn(bob, session.id, turn.id)).rejects.toMatchObject({ code: 'not_found' });
    await expect(api.files.read(bob, session.id, turn.id, 'x')).rejects.toMatchObject({ code: 'not_found' });
    await expect(api.releaseTurn(bob, session.id, turn.id)).rejects.toMatchObject({ code: 'not_found' });
    await expect(api.getWorkspace(bob, ws.id)).rejects.toMatchObject({ code: 'not_found' });
  });

  it('a directory workspace: replaced root refused; a restart with a new root moves the generation and stales old sessions', async () => {
    const api = berth.api;
    const ws = (await api.listWorkspaces(alice)).items.find((w) => w.kind === 'directory')!;
    expect(ws).toMatchObject({ storageId: 'repo', generation: 1 });
    const session = await api.createSession(alice, { workspaceId: ws.id, cwd: 'src' });
    const repo = join(roots, 'repo');
    renameSync(repo, join(roots, 'repo-old'));
    mkdirSync(join(repo, 'src'), { recursive: true });
    await expect(api.openTurn(alice, session.id)).rejects.toMatchObject({ code: 'workspace_unavailable', detail: { reason: 'root_replaced' } });
    await berth.stop();
    berth = await start();
    const again = await berth.api.getWorkspace(alice, ws.id);
    expect(again.generation).toBe(2);
    await expect(berth.api.openTurn(alice, session.id)).rejects.toMatchObject({ code: 'workspace_unavailable', detail: { reason: 'generation_mismatch' } });
    const fresh = await berth.api.createSession(alice, { workspaceId: ws.id, cwd: 'src' });
    const turn = await berth.api.openTurn(alice, fresh.id);
    await berth.api.files.write(alice, fresh.id, turn.id, 'src/x.txt', Buffer.from('x'));
    await berth.api.releaseTurn(alice, fresh.id, turn.id);
  });

  it('a mapped root removed after the start answers workspace_unavailable (root_missing) before anything is claimed', async () => {
    const api = berth.api;
    const ws = (await api.listWorkspaces(alice)).items.find((w) => w.kind === 'directory')!;
    const session = await api.createSession(alice, { workspaceId: ws.id });
    rmSync(join(roots, 'repo'), { recursive: true });
    await expect(api.openTurn(alice, session.id)).rejects.toMatchObject({ code: 'workspace_unavailable', detail: { reason: 'root_missing' } });
    expect((await api.getWorkspace(alice, ws.id)).holder).toBeNull();
  });

  it('refuses overlapping, aliased and non-canonical mappings at start', async () => {
    await berth.stop();
    const bad = [
      [{ scope: 'a', storageId: 's', root: join(roots, 'repo') }, { scope: 'b', storageId: 's', root: join(roots, 'repo', 'src') }],
      [{ scope: 'a', storageId: 's', root: join(roots, 'repo') + '/' }],
      [{ scope: 'a', storageId: 's', root: join(roots, 'missing') }],
      [{ scope: 'a', storageId: 's', root: join(dir, 'data', 'x') }],
    ];
    symlinkSync(join(roots, 'repo'), join(roots, 'alias'));
    bad.push([{ scope: 'a', storageId: 's', root: join(roots, 'repo') }, { scope: 'b', storageId: 't', root: join(roots, 'alias') }]);
    for (const mappings of bad) await expect(start(mappings)).rejects.toMatchObject({ code: 'invalid_request' });
    berth = await start();
  });

  it('the admin clear needs stopped work; a member may not clear; delete waits for the holder', async () => {
    const api = berth.api;
    const ws = await api.createWorkspace(alice, {});
    const session = await api.createSession(alice, { workspaceId: ws.id });
    const turn = await api.openTurn(alice, session.id);
    await expect(api.deleteWorkspace(alice, ws.id)).rejects.toMatchObject({ code: 'workspace_busy' });
    await expect(api.clearWorkspaceHolder(alice, ws.id)).rejects.toMatchObject({ code: 'forbidden' });
    expect(await api.clearWorkspaceHolder(admin, ws.id)).toEqual({ cleared: turn.id });
    // An admin across scopes opens a turn in the session's scope: its member sees it.
    const adminTurn = await api.openTurn(admin, session.id);
    expect((await api.getTurn(alice, session.id, adminTurn.id)).state).toBe('open');
    await api.releaseTurn(alice, session.id, adminTurn.id);
    expect((await api.getTurn(alice, session.id, turn.id))).toMatchObject({ state: 'released', cleared: true });
    await api.deleteWorkspace(alice, ws.id);
    await expect(api.getWorkspace(alice, ws.id)).rejects.toMatchObject({ code: 'workspace_unavailable' });
    await expect(api.openTurn(alice, session.id)).rejects.toMatchObject({ code: 'workspace_unavailable' });
  });

  it('a shell command of a turn runs contained in the workspace; its changes are recorded; release waits for it', async () => {
    const api = berth.api;
    const env = await api.createEnvironment(alice, { name: 'sh' });
    const ws = await api.createWorkspace(alice, {});
    const session = await api.createSession(alice, { environmentId: env.id, workspaceId: ws.id });
    const turn = await api.openTurn(alice, session.id);
    await api.files.mkdir(alice, session.id, turn.id, 'sub');
    await api.files.write(alice, session.id, turn.id, 'sub/old.txt', Buffer.from('old'));
    const x = await api.submitExecution(alice, {
      operationId: 'shell-1',
      session: session.id,
      turn: turn.id,
      cwd: 'sub',
      command: 'pwd > here.txt; sleep 0.3; rm old.txt; echo made > /workspace/made.txt',
    });
    // Release waits for the command (it holds the turn), then records what it changed.
    const released = await api.releaseTurn(alice, session.id, turn.id);
    expect(released.state).toBe('released');
    expect((await api.getExecution(alice, x.id)).status).toBe('exited');
    const shell = (await api.workspaceHistory(alice, ws.id)).items.find((h) => h.tool === 'shell')!;
    expect(shell.executionId).toBe(x.id);
    expect(shell.changes.map((c) => [c.path, c.before === null, c.after === null])).toEqual([
      ['made.txt', true, false],
      ['sub/here.txt', true, false],
      ['sub/old.txt', false, true],
    ]);
    const turn2 = await api.openTurn(alice, session.id);
    expect((await api.files.read(alice, session.id, turn2.id, 'sub/here.txt')).data.toString()).toBe('/workspace/sub\n');
    await api.releaseTurn(alice, session.id, turn2.id);
  });

  it("a contained command sees its own directory workspace at /workspace and no other tenant's root on the host", async () => {
    await berth.stop();
    // Roots outside /tmp (a contained command's /tmp is its own anyway): on the host it would see them read-only.
    const hostRoots = mkdtempSync('/var/tmp/berth-ws-roots-');
    roots = join(hostRoots, 'roots');
    mkdirSync(join(roots, 'repo'), { recursive: true });
    mkdirSync(join(roots, 'other'));
    chmodSync(hostRoots, 0o755);
    onTestFinished(() => rmSync(hostRoots, { recursive: true, force: true }));
    const secret = join(roots, 'repo', 'secret.txt');
    writeFileSync(secret, 'alice-only');
    chmodSync(join(roots, 'repo'), 0o755);
    chmodSync(secret, 0o644); // readable by anyone on the host: only the sandbox's view keeps bob out
    chmodSync(roots, 0o755);
    chownSync(join(roots, 'other'), 65534, 65534);
    const docker = process.env.BERTH_DOCKER;
    process.env.BERTH_DOCKER = '0';
    try {
      // The default providers: the composition hides every mapped root from contained commands.
      berth = await startBerth({
        settings: { dataDir: join(dir, 'data'), store: 'sqlite', maintenanceMs: 600_000 },
        runtimeId: 'rt_workspaces',
        workspaceRoots: [
          { scope: 'alice', storageId: 'repo', root: join(roots, 'repo') },
          { scope: 'bob', storageId: 'other', root: join(roots, 'other') },
        ],
      });
    } finally {
      if (docker === undefined) delete process.env.BERTH_DOCKER;
      else process.env.BERTH_DOCKER = docker;
    }
    const api = berth.api;
    const env = await api.createEnvironment(bob, { name: 'sh' });
    const ws = (await api.listWorkspaces(bob)).items[0]!;
    const session = await api.createSession(bob, { environmentId: env.id, workspaceId: ws.id });
    const turn = await api.openTurn(bob, session.id);
    const x = await api.submitExecution(bob, {
      operationId: 'peek',
      session: session.id,
      turn: turn.id,
      command: `cat ${secret}; ls ${join(roots, 'repo')}; echo mine > /workspace/mine.txt; pwd`,
    });
    const done = await api.getExecution(bob, x.id, 20_000);
    const out = (await api.readOutput(bob, x.id, 'stdout', 0)).data.toString();
    expect(out).not.toContain('alice-only');
    expect(out).not.toContain('secret.txt');
    expect(out.trim().split('\n').at(-1)).toBe('/workspace');
    expect(done.status).toBe('exited');
    await api.releaseTurn(bob, session.id, turn.id);
    expect(readFileSync(join(roots, 'other', 'mine.txt'), 'utf8')).toBe('mine\n');
  });

  it('release closes the gate: a call under way finishes first, a call after it is refused', async () => {
    const api = berth.api;
    const ws = await api.createWorkspace(alice, {});
    const session = await api.createSession(alice, { workspaceId: ws.id });
    const turn = await api.openTurn(alice, session.id);
    const order: string[] = [];
    const write = api.files.write(alice, session.id, turn.id, 'big.bin', Buffer.alloc(48 * 1024 * 1024, 7)).then(() => order.push('write'));
    const release = api.releaseTurn(alice, session.id, turn.id).then(() => order.push('release'));
    const late = api.files.read(alice, session.id, turn.id, 'big.bin', { limit: 1 }).then(
      () => 'admitted',
      (e) => e.code,
    );
    await Promise.all([write, release]);
    expect(order).toEqual(['write', 'release']);
    expect(await late).toBe('invalid_state');
    expect((await api.workspaceHistory(alice, ws.id)).items.map((h) => h.changes[0]!.path)).toEqual(['big.bin']);
  });

  it('two releases at once both answer the released turn', async () => {
    const api = berth.api;
    const ws = await api.createWorkspace(alice, {});
    const session = await api.createSession(alice, { workspaceId: ws.id });
    const turn = await api.openTurn(alice, session.id);
    await api.files.write(alice, session.id, turn.id, 'a', Buffer.from('a'));
    const both = await Promise.all([api.releaseTurn(alice, session.id, turn.id), api.releaseTurn(alice, session.id, turn.id)]);
    expect(both.map((t) => t.state)).toEqual(['released', 'released']);
    expect((await api.getWorkspace(alice, ws.id)).holder).toBeNull();
  });

  it("a member's managed workspaces are held under the scope's quota, even in a burst", async () => {
    await berth.stop();
    berth = await start([], { workspaces: 3 });
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => berth.api.createWorkspace(alice, {})));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    expect(results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason.code)).toEqual(Array(3).fill('quota_exceeded'));
    await berth.api.createWorkspace(bob, {}); // another scope's count is its own
    await berth.api.createWorkspace(admin, {}); // admins are exempt
  });

  it('an execution admitted into a turn and then refused records no shell change, and the release goes through', async () => {
    await berth.stop();
    berth = await start([], { concurrentExecutions: 1 });
    const api = berth.api;
    const env = await api.createEnvironment(alice, { name: 'sh' });
    const ws = await api.createWorkspace(alice, {});
    const session = await api.createSession(alice, { environmentId: env.id, workspaceId: ws.id });
    const turn = await api.openTurn(alice, session.id);
    const first = await api.submitExecution(alice, { operationId: 'long', session: session.id, turn: turn.id, command: 'sleep 0.5' });
    // The scope's one concurrent execution is taken: the second is admitted into the turn, then refused.
    await expect(api.submitExecution(alice, { operationId: 'refused', session: session.id, turn: turn.id, command: 'true' })).rejects.toMatchObject({ code: 'quota_exceeded' });
    await api.files.write(alice, session.id, turn.id, 'tool.txt', Buffer.from('by the tool'));
    const released = await api.releaseTurn(alice, session.id, turn.id);
    expect(released.executions.every((x) => x.recorded)).toBe(true);
    const history = (await api.workspaceHistory(alice, ws.id)).items;
    expect(history.filter((h) => h.tool === 'shell').map((h) => h.executionId)).toEqual([first.id]);
    expect(history.filter((h) => h.tool === 'write').map((h) => h.changes[0]!.path)).toEqual(['tool.txt']);
  });

  it("a scope's waiting acquisitions are bounded: past the cap the answer is workspace_busy at once, other scopes still wait", async () => {
    const api = berth.api;
    const ws = await api.createWorkspace(alice, {});
    const holder = await api.createSession(alice, { workspaceId: ws.id });
    const held = await api.openTurn(alice, holder.id);
    const sessions = await Promise.all(Array.from({ length: WAITERS_PER_SCOPE + 1 }, () => api.createSession(alice, { workspaceId: ws.id })));
    const waits = sessions.slice(0, WAITERS_PER_SCOPE).map((s) => api.openTurn(alice, s.id, { waitMs: 20_000 }).then(() => 'opened', (e) => e.code));
    await new Promise((r) => setTimeout(r, 100)); // every waiter has looked once and is waiting
    const started = Date.now();
    await expect(api.openTurn(alice, sessions.at(-1)!.id, { waitMs: 20_000 })).rejects.toMatchObject({ code: 'workspace_busy', detail: { waiters: 'at_limit' } });
    expect(Date.now() - started).toBeLessThan(2_000);
    // Another scope's wait is its own.
    const bobWs = await api.createWorkspace(bob, {});
    const [b1, b2] = [await api.createSession(bob, { workspaceId: bobWs.id }), await api.createSession(bob, { workspaceId: bobWs.id })];
    const bobHeld = await api.openTurn(bob, b1.id);
    const bobWait = api.openTurn(bob, b2.id, { waitMs: 20_000 });
    await api.releaseTurn(bob, b1.id, bobHeld.id);
    expect((await bobWait).state).toBe('open');
    // Alice's waiters take the storage one after another as each releases.
    await api.releaseTurn(alice, holder.id, held.id);
    let opened = 0;
    for (let i = 0; i < 3; i++) {
      const now = (await api.getWorkspace(alice, ws.id)).holder;
      if (now) {
        opened++;
        await api.releaseTurn(alice, now.sessionId, now.turnId);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(opened).toBeGreaterThan(0);
    // The rest give up at their own deadline; drain them by releasing as they come.
    for (;;) {
      const now = (await api.getWorkspace(alice, ws.id)).holder;
      if (now) await api.releaseTurn(alice, now.sessionId, now.turnId);
      const settled = await Promise.race([Promise.all(waits).then(() => true), new Promise((r) => setTimeout(() => r(false), 50))]);
      if (settled) break;
    }
    expect((await Promise.all(waits)).every((x) => x === 'opened')).toBe(true);
  }, 60_000);
});
