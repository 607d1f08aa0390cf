/**
 * Workspace checkpoints from the typed client and from the `berth` CLI against a real `berth serve` child: a
 * checkpoint in a turn (after tool writes and a shell command), the list, a tree, a diff, a restore that puts the
 * files back and is recorded, a stale restore refused (BerthApiError 412 / exit 1) that changes nothing, the view and
 * its detachment, and the CLI's refusals before anything is sent.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BerthApiError } from '../../src/client/berth-api-error.ts';
import { Berth, type Checkpoint } from '../../src/client/berth-client.ts';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;
let client: Berth;
let environmentId: string;
let host: string;

beforeAll(async () => {
  server = await startServer();
  client = await Berth.connect({ url: server.url, token: tokens.alice });
  environmentId = (await client.environments.create({ name: 'checkpoint shell' })).id;
  host = mkdtempSync(join(tmpdir(), 'berth-cp-cli-'));
});
afterAll(async () => {
  await server?.close();
  rmSync(host, { recursive: true, force: true });
});

const rejection = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);
const sign = (c: { before: unknown; after: unknown }) => (c.before === null ? '+' : c.after === null ? '-' : 'M');

/** Checkpoints until one publishes: the recording of a command that just ended may move the head under it (stale_version). */
async function checkpointAfterCommand(take: () => Promise<Checkpoint>): Promise<Checkpoint> {
  for (let tries = 1; ; tries++) {
    const taken = await take().catch((e: unknown) => e);
    if (!(taken instanceof BerthApiError)) return taken as Checkpoint;
    expect({ code: taken.code, status: taken.status, tries: tries <= 20 }).toEqual({ code: 'stale_version', status: 412, tries: true });
  }
}

describe('checkpoints from the typed client', () => {
  it('checkpoint, list, tree, diff, restore and a stale restore refused; the view and its detachment', async () => {
    expect(client.capabilities.checkpoints).toBe(true);
    const workspace = await client.workspaces.create({ name: 'checkpoints' });
    const session = await client.sessions.create({ environmentId, workspaceId: workspace.id });

    const { first, second, stale } = await client.turns.with(session.id, async (turn) => {
      await turn.files.write('a.txt', 'one\n');
      const shell = await turn.run('mkdir -p out && echo from the shell > out/made.txt', { onStdout: () => undefined });
      expect(shell).toMatchObject({ status: 'exited', exitCode: 0 });
      const first = await checkpointAfterCommand(() => turn.checkpoint());
      expect(first).toMatchObject({ id: expect.stringMatching(/^sha256:[0-9a-f]{64}$/), object: 'checkpoint', workspaceId: workspace.id, reason: 'explicit', files: 2 });

      await turn.files.write('a.txt', 'two\n');
      await turn.files.remove('out', { recursive: true });
      const second = await turn.checkpoint();
      expect(second.revision).toBeGreaterThan(first.revision);

      const restored = await turn.restore(first.id, { expectedRevision: second.revision });
      expect(restored.checkpointId).toBe(first.id);
      expect(restored.changes.map((c) => c.path)).toEqual(['a.txt', 'out', 'out/made.txt']);
      expect((await turn.files.read('out/made.txt')).data.toString()).toBe('from the shell\n');
      const stale = await rejection(turn.restore(second.id, { expectedRevision: second.revision }));
      expect((await turn.files.read('a.txt')).data.toString()).toBe('one\n'); // nothing restored
      return { first, second, stale };
    });
    expect(stale).toBeInstanceOf(BerthApiError);
    expect(stale).toMatchObject({ code: 'stale_version', status: 412 });

    expect((await client.workspaces.checkpoints(workspace.id)).map((c) => c.id)).toEqual([first.id, second.id]);
    const page = await client.workspaces.checkpointsPage(workspace.id, { limit: 1 });
    expect(page.next).toBeDefined();
    const tree = await client.workspaces.checkpoint(workspace.id, first.id);
    expect(tree.entries.map((e) => `${e.type} ${e.path}`)).toEqual(['file a.txt', 'directory out', 'file out/made.txt']);
    const diff = await client.workspaces.diff(workspace.id, first.id, second.id);
    expect(diff.changes.map((c) => `${sign(c)} ${c.path}`)).toEqual(['M a.txt', '- out', '- out/made.txt']);
    expect((await client.workspaces.history(workspace.id)).at(-1)).toMatchObject({ tool: 'restore' });

    // A native environment runs in the workspace's directory itself: no view is prepared, none to detach.
    const unbound = { object: 'mount', workspaceId: workspace.id, state: 'unbound', target: null, mountGeneration: 0, revision: null, pins: [], problem: null };
    expect(await client.workspaces.mount(workspace.id)).toEqual(unbound);
    expect(await client.workspaces.detach(workspace.id)).toEqual(unbound);
    await expect(client.workspaces.checkpoint(workspace.id, 'sha256:zz')).rejects.toMatchObject({ code: 'invalid_request', status: 400 });
    await expect(client.workspaces.diff(workspace.id, first.id, `sha256:${'f'.repeat(64)}`)).rejects.toMatchObject({ code: 'not_found', status: 404 });
  }, 60_000);
});

describe('berth workspace checkpoints|checkpoint|diff|mount|detach and berth turn checkpoint|restore', () => {
  const cli = (...args: string[]) => berth(args, cleanEnv({ BERTH_URL: server.url, BERTH_TOKEN: tokens.alice }));
  async function ok(...args: string[]): Promise<string> {
    const run = await cli(...args);
    expect(run.code, `berth ${args.join(' ')}: ${run.stderr}`).toBe(0);
    return run.stdout.trim();
  }

  it('round trip: two checkpoints, the list, a tree, a diff (text and --json), a restore and a stale one', async () => {
    const workspace = await ok('workspace', 'create', '--name', 'cli checkpoints');
    const session = await ok('session', 'create', '--workspace', workspace);
    const turn = await ok('turn', 'open', session);
    writeFileSync(join(host, 'a.txt'), 'one\n');
    writeFileSync(join(host, 'b.txt'), 'bee\n');
    await ok('cp', '--turn', turn, join(host, 'a.txt'), `${session}:a.txt`);
    const first = await ok('turn', 'checkpoint', session, turn);
    expect(first).toMatch(/^sha256:[0-9a-f]{64}$/);
    await ok('cp', '--turn', turn, join(host, 'b.txt'), `${session}:b.txt`);
    const second = JSON.parse(await ok('turn', 'checkpoint', session, turn, '--json'));

    const listed = (await ok('workspace', 'checkpoints', workspace)).split('\n');
    expect(listed[0]).toMatch(/^CHECKPOINT\s+REVISION\s+REASON\s+FILES\s+BYTES\s+AT$/);
    expect(listed.slice(1).map((line) => line.split(/\s+/).slice(0, 5))).toEqual([
      [first, '2', 'explicit', '1', '4'],
      [second.id, String(second.revision), 'explicit', '2', '8'],
    ]);
    expect((await ok('workspace', 'checkpoints', workspace, '--json')).split('\n').map((l) => JSON.parse(l).id)).toEqual([first, second.id]);
    expect((await ok('workspace', 'checkpoint', workspace, second.id)).split('\n').slice(1)).toEqual([
      expect.stringMatching(/^file\s+0\d{3}\s+4\s+a\.txt$/),
      expect.stringMatching(/^file\s+0\d{3}\s+4\s+b\.txt$/),
    ]);

    expect(await ok('workspace', 'diff', workspace, first, second.id)).toBe('+ b.txt');
    expect(await ok('workspace', 'diff', workspace, second.id, first)).toBe('- b.txt');
    expect(JSON.parse(await ok('workspace', 'diff', workspace, first, second.id, '--json'))).toMatchObject({ from: first, to: second.id, changes: [{ path: 'b.txt', before: null }] });

    expect(await ok('turn', 'restore', session, turn, first, '--expect-revision', String(second.revision))).toBe(`restored ${first}: 1 change(s)`);
    const stale = await cli('turn', 'restore', session, turn, second.id, '--expect-revision', String(second.revision));
    expect(stale.code).toBe(1);
    expect(stale.stdout).toBe('');
    expect(stale.stderr).toMatch(/^berth: The workspace changed since the revision named/);
    await ok('cp', '--turn', turn, `${session}:a.txt`, join(host, 'back.txt'));
    expect((await cli('cp', '--turn', turn, `${session}:b.txt`, join(host, 'gone.txt'))).code).toBe(1); // b.txt restored away

    expect(await ok('workspace', 'mount', workspace)).toBe(`${workspace}  unbound  mount generation 0  revision -`);
    expect(JSON.parse(await ok('workspace', 'detach', workspace, '--json'))).toMatchObject({ state: 'unbound', target: null });
    await ok('turn', 'release', session, turn);
  }, 180_000); // some twenty CLI processes, each a second or more on a shared machine

  it('refuses a bad --expect-revision and a wrong arity before sending; a malformed checkpoint id is invalid_request', async () => {
    const id = `sha256:${'0'.repeat(64)}`;
    expect((await cli('turn', 'restore', 's', 't', id, '--expect-revision', 'soon')).code).toBe(2);
    expect((await cli('turn', 'restore', 's', 't', id, '--expect-revision', '-1')).code).toBe(2);
    expect((await cli('turn', 'checkpoint', 's', 't', '--expect-revision', '1')).code).toBe(2);
    expect((await cli('workspace', 'diff', 'w', id)).code).toBe(2);
    const workspace = await ok('workspace', 'create');
    const bad = await cli('workspace', 'checkpoint', workspace, '../../etc');
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^berth: Invalid params\.checkpointId/);
  }, 120_000);
});
