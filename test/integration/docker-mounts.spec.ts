/**
 * Workspace views on Docker allocations through the runtime (issue 14): a turn's shell command runs in the
 * allocation's staging volume, filled from the head; its changes reach the workspace directory through a published
 * checkpoint; the allocation's release saves and detaches the view before the container and volume go; a container
 * removed behind Berth's back leaves the view unavailable and the next allocation gets the head at a new generation.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { MountContext } from '../../src/machines/mount.machine.ts';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';
import { testProviders } from './environments-berth.ts';
import { gathered } from '../../src/runtime/core/stream-replay.ts';

const run = newTestRun();
const admin: Caller = { scope: 'default', role: 'admin' };
let dir: string;
let root: string;
let berth: Berth;

const start = () =>
  startBerth({
    settings: { dataDir: join(dir, 'data'), store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_mounts',
    providers: testProviders(join(dir, 'data'), { extraLabels: run }),
    workspaceRoots: [{ scope: 'default', storageId: 'repo', root }],
  });

/** A docker environment, a session on the directory workspace `repo`, and an open turn. */
async function turnOnDocker() {
  const env = await berth.api.createEnvironment(admin, { name: `mounts ${Math.random().toString(36).slice(2, 8)}`, profile: { provider: 'docker', workspaceMb: 64 } });
  const ws = (await berth.api.listWorkspaces(admin)).items.find((w) => w.storageId === 'repo')!;
  const session = await berth.api.createSession(admin, { workspaceId: ws.id, environmentId: env.id });
  const turn = await berth.api.openTurn(admin, session.id);
  return { env, ws, session, turn };
}

async function exec(session: string, turn: string, command: string) {
  const x = await berth.api.submitExecution(admin, { operationId: `op-${Math.random()}`, session, turn, command });
  return berth.api.getExecution(admin, x.id, 60_000);
}

const streamTypes = async (stream: string) => {
  const types: string[] = [];
  for (const e of await berth.runtime.store.readStream(stream)) types.push(`${e.type}@${e.position}`);
  return types;
};

beforeEach(async () => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'berth-mounts-')));
  chmodSync(dir, 0o755);
  root = join(dir, 'repo');
  mkdirSync(join(root, 'src'), { recursive: true });
  writeFileSync(join(root, 'src', 'main.txt'), 'from the host\n');
  berth = await start();
});

afterEach(async () => {
  await berth?.stop();
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => removeTestResources(run));

describe.skipIf(!dockerAvailable)('workspace views on Docker', () => {
  it('a command sees the head and tool writes; its changes are published and reach the directory and the tools', async () => {
    const { ws, session, turn } = await turnOnDocker();
    await berth.api.files.write(admin, session.id, turn.id, 'src/in.txt', Buffer.from('written by a tool\n'));
    const x = await exec(session.id, turn.id, 'cat src/main.txt src/in.txt > out.txt && id -u && pwd && mkdir -p made && echo new > made/new.txt && rm src/main.txt');
    expect(x).toMatchObject({ status: 'exited', exitCode: 0 });
    expect(x.checkpoint).toMatchObject({ outcome: 'published' });
    const stdout = (await berth.api.readOutput(admin, x.id, 'stdout', 0)).data.toString();
    expect(stdout).toBe('1000\n/workspace\n');
    expect(readFileSync(join(root, 'out.txt'), 'utf8')).toBe('from the host\nwritten by a tool\n');
    expect(readFileSync(join(root, 'made', 'new.txt'), 'utf8')).toBe('new\n');
    expect(existsSync(join(root, 'src', 'main.txt'))).toBe(false);
    expect((await berth.api.files.read(admin, session.id, turn.id, 'made/new.txt')).data.toString()).toBe('new\n');
    const workspace = await berth.runtime.actors.get<{ revision: number; checkpoint: { id: string } }>('workspace', ws.id);
    expect(workspace!.context.checkpoint.id).toBe(x.checkpoint!.id);
    // A tool write after the command is in the view the next command sees (the view is refreshed to the head).
    await berth.api.files.write(admin, session.id, turn.id, 'made/new.txt', Buffer.from('edited\n'));
    const y = await exec(session.id, turn.id, 'cat made/new.txt');
    expect((await berth.api.readOutput(admin, y.id, 'stdout', 0)).data.toString()).toBe('edited\n');
    // The view's stream is its scope's to replay (and no one else's).
    expect((await gathered(await berth.api.replay(admin, `mount-${ws.id}`))).map((s) => s.event.type)).toContain('mount.checkpoint_published');
    await expect(berth.api.replay({ scope: 'other', role: 'admin' }, `mount-${ws.id}`)).rejects.toMatchObject({ code: 'not_found' });
    await berth.api.releaseTurn(admin, session.id, turn.id);
  });

  it('concurrent commands wait for the one preparation of the view and both run in it', async () => {
    const { ws, session, turn } = await turnOnDocker();
    const [a, b] = await Promise.all([exec(session.id, turn.id, 'echo a > a.txt'), exec(session.id, turn.id, 'echo b > b.txt')]);
    expect([a.status, b.status]).toEqual(['exited', 'exited']);
    const prepared = (await berth.runtime.store.readStream(`mount-${ws.id}`)).filter((e) => e.type === 'mount.prepare_requested');
    expect(prepared).toHaveLength(1);
    expect(readFileSync(join(root, 'a.txt'), 'utf8') + readFileSync(join(root, 'b.txt'), 'utf8')).toBe('a\nb\n');
    await berth.api.releaseTurn(admin, session.id, turn.id);
  });

  it('one view per allocation: another workspace\'s command first saves and detaches the idle view there', async () => {
    const { env, ws, session, turn } = await turnOnDocker();
    expect((await exec(session.id, turn.id, 'echo mine > mine.txt')).checkpoint?.outcome).toBe('published');
    await berth.api.releaseTurn(admin, session.id, turn.id);
    const other = await berth.api.createWorkspace(admin, { name: 'other' });
    const otherSession = await berth.api.createSession(admin, { workspaceId: other.id, environmentId: env.id });
    const otherTurn = await berth.api.openTurn(admin, otherSession.id);
    const seen = await exec(otherSession.id, otherTurn.id, 'ls; echo theirs > theirs.txt');
    expect(seen.target.allocationId).toBeDefined();
    expect((await berth.api.readOutput(admin, seen.id, 'stdout', 0)).data.toString()).toBe('');
    expect((await berth.runtime.actors.get('mount', ws.id))!.state).toBe('detached');
    await berth.api.releaseTurn(admin, otherSession.id, otherTurn.id);
    // Back to the first: its view is made again (generation 2), with its files and not the other's.
    const again = await berth.api.openTurn(admin, session.id);
    const back = await exec(session.id, again.id, 'ls');
    expect((await berth.api.readOutput(admin, back.id, 'stdout', 0)).data.toString().split('\n')).toEqual(expect.arrayContaining(['mine.txt', 'src']));
    expect((await berth.api.readOutput(admin, back.id, 'stdout', 0)).data.toString()).not.toContain('theirs.txt');
    expect((await berth.runtime.actors.get<MountContext>('mount', ws.id))!.context.mountGeneration).toBe(2);
    await berth.api.releaseTurn(admin, session.id, again.id);
  });

  it('two checkpoint attempts racing on one head: exactly one publishes, the other is recorded as stale', async () => {
    const { ws, session, turn } = await turnOnDocker();
    const x = await exec(session.id, turn.id, 'seq 1 2000 | while read i; do echo $i > f$i.txt; done');
    expect(x.checkpoint?.outcome).toBe('published');
    const mount = (await berth.runtime.actors.get<MountContext>('mount', ws.id))!.context;
    const head = (await berth.runtime.actors.get<{ revision: number; generation: number }>('workspace', ws.id))!.context;
    const attempt = (attemptId: string) => ({
      type: 'mount.checkpoint_started',
      attemptId,
      reason: 'explicit',
      bindingGeneration: head.generation,
      target: mount.target,
      mountGeneration: mount.mountGeneration,
      baseRevision: head.revision,
      at: Date.now(),
    });
    await Promise.all([berth.runtime.actors.send('mount', ws.id, attempt('race-a')), berth.runtime.actors.send('mount', ws.id, attempt('race-b'))]);
    const settled = await waitFor(async () => (await berth.runtime.actors.get<MountContext>('mount', ws.id))!.context.attempts, {
      until: (a) => a['race-a']?.status !== 'capturing' && a['race-b']?.status !== 'capturing',
      timeoutMs: 30_000,
      what: 'both attempts settled',
    });
    expect([settled['race-a']!.status, settled['race-b']!.status].sort()).toEqual(['published', 'stale']);
    const published = (await berth.runtime.store.readStream(`workspace-${ws.id}`)).filter(
      (e) => e.type === 'workspace.checkpoint_published' && ['race-a', 'race-b'].includes((e.data as { attemptId: string }).attemptId),
    );
    expect(published).toHaveLength(1);
    expect((await berth.runtime.actors.get<{ revision: number }>('workspace', ws.id))!.context.revision).toBe(head.revision + 1);
    // The explicit checkpoint through the API: on the head now, so it publishes (and lists).
    const explicit = await berth.api.checkpoints.create(admin, session.id, turn.id);
    expect(explicit).toMatchObject({ reason: 'explicit', revision: head.revision + 2, files: 2001 }); // the 2000 and src/main.txt
    await berth.api.releaseTurn(admin, session.id, turn.id);
  });

  it('release saves first: the final checkpoint is published before the container and its volume are gone', async () => {
    const { env, ws, session, turn } = await turnOnDocker();
    const x = await exec(session.id, turn.id, 'echo kept > kept.txt');
    expect(x.checkpoint?.outcome).toBe('published');
    await berth.api.releaseTurn(admin, session.id, turn.id);
    const allocationId = x.target.allocationId;
    const volumeFilter = { label: [`${LABEL.allocationId}=${allocationId}`] };
    expect((await rawDocker.listVolumes({ filters: volumeFilter })).Volumes?.length).toBeGreaterThan(0);
    await berth.api.release(admin, env.id, allocationId);
    await waitFor(async () => (await berth.api.environments.allocationView(allocationId)).state, { until: (s) => s === 'released', timeoutMs: 60_000, what: 'released' });
    const mount = await streamTypes(`mount-${ws.id}`);
    const allocation = await streamTypes(`allocation-${allocationId}`);
    const published = mount.filter((t) => t.startsWith('mount.checkpoint_published')).at(-1)!;
    const detached = mount.find((t) => t.startsWith('mount.detached'))!;
    const deallocated = allocation.find((t) => t.startsWith('allocation.deallocated'))!;
    const at = (t: string) => BigInt(t.split('@')[1]!);
    expect(at(published)).toBeLessThan(at(detached));
    expect(at(detached)).toBeLessThan(at(deallocated));
    expect((await rawDocker.listVolumes({ filters: volumeFilter })).Volumes ?? []).toHaveLength(0);
    expect(readFileSync(join(root, 'kept.txt'), 'utf8')).toBe('kept\n');
  });

  it('docker rm -f under an active view: unavailable, the head kept, the next allocation gets it at a new generation', async () => {
    const { ws, session, turn } = await turnOnDocker();
    const x = await exec(session.id, turn.id, 'echo one > one.txt');
    expect(x.checkpoint?.outcome).toBe('published');
    const [container] = await rawDocker.listContainers({ all: true, filters: { label: [`${LABEL.allocationId}=${x.target.allocationId}`] } });
    await rawDocker.getContainer(container!.Id).remove({ force: true });
    // Maintenance (here: a reconcile) finds the allocation gone: the view becomes unavailable.
    await berth.runtime.actors.send('allocation', x.target.allocationId, { type: 'allocation.reconcile_requested', at: Date.now() });
    await waitFor(async () => (await berth.runtime.actors.get('mount', ws.id))!.state, { until: (s) => s === 'unavailable', timeoutMs: 30_000, what: 'mount unavailable' });
    const y = await exec(session.id, turn.id, 'cat one.txt');
    expect(y.target.generation).toBe(x.target.generation + 1);
    expect((await berth.api.readOutput(admin, y.id, 'stdout', 0)).data.toString()).toBe('one\n');
    const mount = await berth.runtime.actors.get<{ mountGeneration: number }>('mount', ws.id);
    expect(mount!.context.mountGeneration).toBe(2);
    await berth.api.releaseTurn(admin, session.id, turn.id);
  });
});
