/**
 * The sandbox-shaped client (issue 18) against a real `berth serve`: one call makes a sandbox, `run` answers stdout,
 * stderr and the exit code and throws on a non-zero exit, `spawn` runs in the background with stdin and kill, the
 * file tools and the commands see one workspace, `connect` by id or name, `list`, and `kill` in one call; natively
 * and on a Docker profile when an engine is there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../fixtures/wait-for.ts';
import { Berth, CommandExitError, isBerthApiError, type Sandbox } from '../../src/client/index.ts';
import { dockerAvailable } from '../integration/docker-env.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;
let berth: Berth;

beforeAll(async () => {
  server = await startServer();
  berth = await Berth.connect({ url: server.url, token: tokens.alice });
});
afterAll(() => server?.close());

const profiles: [string, Record<string, unknown>, boolean][] = [
  ['native', {}, true],
  ['docker', { provider: 'docker', image: 'berth-base:latest' }, dockerAvailable],
];

describe.each(profiles)('a sandbox on the %s profile', (_kind, profile, available) => {
  let sandbox: Sandbox;
  beforeAll(async () => {
    if (available) sandbox = await berth.sandboxes.create({ profile });
  }, 180_000);
  afterAll(() => sandbox?.kill());

  it.skipIf(!available)('should answer stdout, stderr and the exit code of a command, streaming them as they come', async () => {
    const streamed: string[] = [];
    const result = await sandbox.run('echo out; echo err >&2', { onStdout: (text) => streamed.push(text) });
    expect(result).toMatchObject({ stdout: 'out\n', stderr: 'err\n', exitCode: 0, status: 'exited', timedOut: false, truncated: false });
    expect(streamed.join('')).toBe('out\n');
  });

  it.skipIf(!available)('should throw CommandExitError on a non-zero exit, with the output, unless asked not to', async () => {
    const error = await sandbox.run(['sh', '-c', 'echo partial; echo boom >&2; exit 3']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CommandExitError);
    expect(error).toMatchObject({ exitCode: 3, stdout: 'partial\n', stderr: 'boom\n' });
    expect((error as Error).message).toContain('exited with 3');
    expect(await sandbox.run('exit 4', { throwOnError: false })).toMatchObject({ exitCode: 4 });
  });

  it.skipIf(!available)('should pass stdin, cwd and env, and say when the timeout killed the command', async () => {
    await sandbox.files.mkdir('sub');
    expect((await sandbox.run('cat; pwd; echo "$GREETING"', { stdin: 'in\n', cwd: 'sub', env: { GREETING: 'hi' } })).stdout).toMatch(/^in\n.*\/sub\nhi\n$/);
    const slow = await sandbox.run('sleep 30', { timeoutMs: 300, throwOnError: false });
    expect(slow.timedOut).toBe(true);
    expect(slow.exitCode).not.toBe(0);
  });

  it.skipIf(!available)('should keep only the end of output larger than maxOutputBytes', async () => {
    const result = await sandbox.run('seq 1 20000', { maxOutputBytes: 100 });
    expect(result.truncated).toBe(true);
    expect(Buffer.byteLength(result.stdout)).toBeLessThanOrEqual(100);
    expect(result.stdout.endsWith('19999\n20000\n')).toBe(true);
  });

  it.skipIf(!available)('should share one workspace between the file tools and the commands', async () => {
    await sandbox.files.write('notes/a.txt', 'from the tools\n');
    expect((await sandbox.run('cat notes/a.txt && echo from the command > notes/b.txt')).stdout).toBe('from the tools\n');
    expect(await sandbox.files.read('notes/b.txt')).toBe('from the command\n');
    expect((await sandbox.files.list('notes')).map((e) => e.name)).toEqual(['a.txt', 'b.txt']);
    await sandbox.files.remove('notes', { recursive: true });
    expect(await sandbox.files.exists('notes')).toBe(false);
  });

  it.skipIf(!available)('should watch the files the tools and the commands change, from now on, under a path', async () => {
    await sandbox.files.write('before/old.txt', 'not seen: written before the watch\n');
    const watch = sandbox.files.watch({ under: 'watched' });
    const seen: { path: string; change: string; tool: string }[] = [];
    const collecting = (async () => {
      for await (const e of watch) {
        seen.push({ path: e.path, change: e.change, tool: e.tool });
        if (seen.length === 4) break;
      }
    })();
    await sandbox.files.write('elsewhere.txt', 'not under the path\n');
    await sandbox.files.write('watched/a.txt', 'one\n');
    await sandbox.run('echo two >> watched/a.txt; echo new > watched/b.txt');
    // A command's changes are recorded once its view is checkpointed, a moment after it ends: the removal waits for
    // them, or the command's record would already see the file gone.
    await waitFor(() => seen.length, { what: "the command's changes watched", until: (n) => n === 3, timeoutMs: 15_000 });
    await sandbox.files.remove('watched/a.txt');
    await Promise.race([collecting, new Promise((r) => setTimeout(r, 15_000))]);
    watch.close();
    expect(seen).toHaveLength(4);
    expect(seen).toEqual(
      expect.arrayContaining([
        { path: 'watched/a.txt', change: 'created', tool: 'write' },
        { path: 'watched/a.txt', change: 'modified', tool: 'shell' },
        { path: 'watched/b.txt', change: 'created', tool: 'shell' },
        { path: 'watched/a.txt', change: 'removed', tool: 'remove' },
      ]),
    );
  });

  it.skipIf(!available)('should spawn in the background: stdin written as it goes, then kill', async () => {
    const echo = await sandbox.spawn('cat', { stdin: 'pipe' });
    echo.sendStdin('one\n');
    echo.sendStdin('two\n');
    echo.closeStdin();
    expect((await echo.wait()).stdout).toBe('one\ntwo\n');

    const sleeper = await sandbox.spawn('sleep 60');
    await sleeper.kill();
    const ended = await sleeper.wait().catch((e: unknown) => e);
    expect(ended).toBeInstanceOf(CommandExitError);
    expect((ended as CommandExitError).status).toBe('cancelled');
  });
});

describe('sandboxes by name and id', () => {
  it('should answer the same sandbox to a create repeated with the same name, and connect by name or id', async () => {
    const name = `named-${Date.now()}`;
    const first = await berth.sandboxes.create({ name });
    const again = await berth.sandboxes.create({ name });
    expect(again.id).toBe(first.id);
    expect(again.workspaceId).toBe(first.workspaceId);
    expect((await berth.workspaces.list()).filter((w) => w.name === `sandbox ${name}`)).toHaveLength(1);

    await first.files.write('shared.txt', 'seen by every client');
    const other = await Berth.connect({ url: server.url, token: tokens.alice });
    for (const key of [name, first.id]) {
      const connected = await other.sandboxes.connect(key);
      expect(connected.turn.id).toBe(first.turn.id);
      expect((await connected.run('cat shared.txt')).stdout).toBe('seen by every client');
    }
    expect((await berth.sandboxes.list()).map((s) => s.name)).toContain(name);

    await first.kill();
    await first.kill(); // a second kill answers at once
    expect((await berth.sandboxes.list()).map((s) => s.name)).not.toContain(name);
    expect((await berth.workspaces.list()).filter((w) => w.name === `sandbox ${name}`)).toHaveLength(0);
    const gone = await other.sandboxes.connect(name).catch((e: unknown) => e);
    expect(isBerthApiError(gone)).toBe(true);
  });

  it('should pause, hold and resume the sandbox through its lease', async () => {
    const sandbox = await berth.sandboxes.create();
    expect(await sandbox.pause()).toMatchObject({ state: 'paused' });
    expect(await sandbox.hold()).toMatchObject({ state: 'held' });
    expect(await sandbox.resume()).toMatchObject({ state: 'running' });
    expect((await sandbox.info()).state).toBe('running');
    expect((await sandbox.run('echo back')).stdout).toBe('back\n');
    await sandbox.kill();
    expect((await berth.leases.get(sandbox.name)).state).toBe('released');
  });

  it('should keep a workspace it did not make, and take it by name', async () => {
    const workspace = await berth.workspaces.create({ name: `kept-${Date.now()}` });
    const sandbox = await berth.sandboxes.create({ workspace: workspace.name! });
    expect(sandbox.workspaceId).toBe(workspace.id);
    await sandbox.files.write('left.txt', 'still here');
    await sandbox.kill();
    expect((await berth.workspaces.get(workspace.id)).id).toBe(workspace.id);
  });

  it("should not let another tenant connect to, list or kill a sandbox", async () => {
    const sandbox = await berth.sandboxes.create();
    const bob = await Berth.connect({ url: server.url, token: tokens.bob });
    for (const key of [sandbox.name, sandbox.id]) {
      expect(await bob.sandboxes.connect(key).catch((e: unknown) => (e as { code?: string }).code)).toBe('not_found');
      expect(await bob.sandboxes.kill(key).catch((e: unknown) => (e as { code?: string }).code)).toBe('not_found');
    }
    expect((await bob.sandboxes.list()).map((s) => s.id)).not.toContain(sandbox.id);
    expect((await sandbox.run('echo alive')).stdout).toBe('alive\n');
    await sandbox.kill();
  });
});
