/**
 * The `berth` CLI's workspaces against a real `berth serve` child and real host files: workspace create/ls/history/rm,
 * a session bound to a workspace, turn open/release, `exec --session --turn` writing a file that `berth cp` brings
 * back, `cp` host -> workspace (files and -r trees) read back by a command, a second turn on a held workspace
 * refused with a clear workspace_busy message and exit 1, and the refusals made before anything is sent.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;
let host: string;
const envName = `ws-cli-${Date.now()}`;

const cli = (...args: string[]) => berth(args, cleanEnv({ BERTH_URL: server.url, BERTH_TOKEN: tokens.alice }));

/** Runs the CLI, expects exit 0, answers its stdout trimmed. */
async function ok(...args: string[]): Promise<string> {
  const run = await cli(...args);
  expect(run.code, `berth ${args.join(' ')}: ${run.stderr}`).toBe(0);
  return run.stdout.trim();
}

beforeAll(async () => {
  server = await startServer();
  host = mkdtempSync(join(tmpdir(), 'berth-ws-cli-'));
  await ok('env', 'create', envName);
});
afterAll(async () => {
  await server?.close();
  rmSync(host, { recursive: true, force: true });
});

async function workspaceSession(): Promise<{ workspace: string; session: string }> {
  const workspace = await ok('workspace', 'create', '--name', `cli ${Math.random().toString(36).slice(2, 8)}`);
  const session = await ok('session', 'create', '--workspace', workspace, '--env', envName);
  return { workspace, session };
}

describe('berth workspace, session, turn, exec --turn and cp', () => {
  it('round trip: a command in a turn writes a file that cp brings back; cp uploads files and trees a command reads', async () => {
    const { workspace, session } = await workspaceSession();
    expect(workspace).toMatch(/^\S+$/);
    expect(await ok('workspace', 'ls')).toMatch(new RegExp(`^${workspace}\\s+managed\\s+cli \\S+\\s+active\\s+-$`, 'm'));
    expect(JSON.parse(await ok('session', 'show', session, '--json'))).toMatchObject({ workspaceId: workspace, cwd: '' });

    const turn = await ok('turn', 'open', session);
    expect(await ok('workspace', 'show', workspace)).toContain(`held by turn ${turn}`);
    const made = await cli('exec', '--session', session, '--turn', turn, '--', 'sh', '-c', 'mkdir -p out && echo from the shell > out/made.txt && pwd');
    expect(made).toMatchObject({ code: 0, stdout: '/workspace\n' });
    await ok('cp', '--turn', turn, `${session}:out/made.txt`, host); // an existing directory: under its own name
    expect(readFileSync(join(host, 'made.txt'), 'utf8')).toBe('from the shell\n');
    await ok('cp', '--turn', turn, `${session}:out/made.txt`, join(host, 'local.txt'));
    expect(readFileSync(join(host, 'local.txt'), 'utf8')).toBe('from the shell\n');
    expect(await ok('turn', 'release', session, turn)).toMatch(new RegExp(`^${turn}\\s+released`));

    // Without --turn, cp opens and releases a turn of its own.
    writeFileSync(join(host, 'up.txt'), 'uploaded from the host\n');
    mkdirSync(join(host, 'tree/sub'), { recursive: true });
    writeFileSync(join(host, 'tree/a.txt'), 'a\n');
    writeFileSync(join(host, 'tree/sub/b.bin'), Buffer.from([0, 1, 2, 255]));
    await ok('cp', join(host, 'up.txt'), `${session}:`);
    await ok('cp', '-r', join(host, 'tree'), `${session}:copied`);
    expect(JSON.parse(await ok('workspace', 'show', workspace, '--json')).holder).toBeNull();

    const second = await ok('turn', 'open', session);
    const read = await cli('exec', '--session', session, '--turn', second, '--', 'sh', '-c', 'cat up.txt copied/a.txt && od -An -tu1 copied/sub/b.bin');
    expect(read.code, read.stderr).toBe(0);
    expect(read.stdout.replace(/\s+/g, ' ').trim()).toBe('uploaded from the host a 0 1 2 255');
    await ok('cp', '-r', '--turn', second, `${session}:copied`, join(host, 'back'));
    expect(readFileSync(join(host, 'back/a.txt'), 'utf8')).toBe('a\n');
    expect(readFileSync(join(host, 'back/sub/b.bin'))).toEqual(Buffer.from([0, 1, 2, 255]));
    await ok('turn', 'release', session, second);

    const history = (await ok('workspace', 'history', workspace, '--json')).split('\n').map((line) => JSON.parse(line));
    expect(history.map((h) => h.tool)).toEqual(['shell', 'write', 'mkdir', 'write', 'mkdir', 'write', 'shell']);
    expect(history[0]).toMatchObject({ turnId: turn, changes: [{ path: 'out', kind: 'directory', before: null }, { path: 'out/made.txt', before: null }] });
    expect(await ok('workspace', 'history', workspace)).toMatch(/ {4}\S+ {2}up\.txt {2}- -> 23$/m);

    await ok('workspace', 'rm', workspace);
    expect(await ok('workspace', 'ls')).not.toContain(workspace);
  }, 120_000);

  it('a second turn on a held workspace: a clear workspace_busy message and exit 1, from turn open and from cp', async () => {
    const { workspace, session } = await workspaceSession();
    const other = await ok('session', 'create', '--workspace', workspace);
    const turn = await ok('turn', 'open', session);

    const busy = await cli('turn', 'open', other);
    expect(busy.code).toBe(1);
    expect(busy.stdout).toBe('');
    expect(busy.stderr).toMatch(/^berth: The workspace is busy: .*--wait MS waits for it/);
    writeFileSync(join(host, 'blocked.txt'), 'x');
    const copy = await cli('cp', join(host, 'blocked.txt'), `${other}:blocked.txt`);
    expect(copy.code).toBe(1);
    expect(copy.stderr).toMatch(/^berth: The workspace is busy/);
    const rm = await cli('workspace', 'rm', workspace);
    expect(rm.code).toBe(1);
    expect(rm.stderr).toContain('berth: ');

    const waiting = cli('turn', 'open', other, '--wait', '20000');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await ok('turn', 'release', session, turn);
    const waited = await waiting;
    expect(waited.code, waited.stderr).toBe(0);
    await ok('turn', 'release', other, waited.stdout.trim());
  }, 60_000);

  it('refuses before sending: a file over 64 MiB, two host paths, --turn without --session, a stray flag, no subcommand', async () => {
    const { session } = await workspaceSession();
    const big = join(host, 'big.bin');
    writeFileSync(big, '');
    truncateSync(big, 64 * 1024 * 1024 + 1); // sparse: nothing is written to disk
    const tooBig = await cli('cp', big, `${session}:big.bin`);
    expect(tooBig.code).toBe(1);
    expect(tooBig.stderr).toMatch(/big\.bin is 67108865 bytes: workspace files are at most 67108864 bytes \(64 MiB\)/);

    expect((await cli('cp', big, join(host, 'elsewhere'))).code).toBe(2);
    expect((await cli('exec', '--turn', 'x', envName, '--', 'true')).code).toBe(2);
    expect((await cli('workspace', 'ls', '--name', 'x')).code).toBe(2);
    expect((await cli('workspace')).code).toBe(2);
    expect((await cli('turn', 'open', session, '--wait', 'soon')).code).toBe(2);
  }, 60_000);
});
