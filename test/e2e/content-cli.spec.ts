/**
 * The content CLI against a real `berth serve`: `berth env push ENV DIR` (a tar stream with progress),
 * `berth env build ENV --follow` (the installers' log), `berth env versions ENV`, `berth env activate ENV N`.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth, cleanEnv } from '../integration/cli-process.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';
import { createNamed, run } from './content-client.ts';

let server: BerthServer;
let project: string;
beforeAll(async () => {
  server = await startServer();
  project = mkdtempSync(path.join(tmpdir(), 'berth-push-'));
});
afterAll(async () => {
  await server?.close();
  rmSync(project, { recursive: true, force: true });
});

const cli = (...args: string[]) => berth(['env', ...args, '--url', server.url, '--token', tokens.alice], cleanEnv());

describe('berth env push/build/versions/activate', () => {
  it('should push a folder, build it following the log, list versions and activate an earlier one', async () => {
    const env = await createNamed(server, 'Cli Project');
    mkdirSync(path.join(project, 'scripts'));
    mkdirSync(path.join(project, 'node_modules', 'junk'), { recursive: true });
    writeFileSync(path.join(project, 'scripts', 'run.sh'), 'echo v1\n');
    writeFileSync(path.join(project, 'node_modules', 'junk', 'x.js'), 'not pushed');
    writeFileSync(path.join(project, 'setup.sh'), 'echo "setup output line"\n');

    const pushed = await cli('push', 'Cli Project', project);
    expect(pushed.code, pushed.stderr).toBe(0);
    expect(pushed.stdout).toMatch(/^2 files, \d+ bytes/);
    // GNU tar writes whole 10 KiB records: two small files fill one.
    expect(pushed.stderr).toMatch(/^pushed 10 KiB$/m);
    expect((await server.json(`/v1/environments/${env.id}/files`)).entries.map((e: { path: string }) => e.path)).toEqual(['scripts', 'scripts/run.sh', 'setup.sh']);

    const built = await cli('build', env.id, '--follow');
    expect(built.code, built.stderr).toBe(0);
    expect(built.stdout).toContain('$ sh setup.sh');
    expect(built.stdout).toContain('setup output line');
    expect(built.stdout.trim().split('\n').at(-1)).toBe('version 1 ready');

    writeFileSync(path.join(project, 'scripts', 'run.sh'), 'echo v2\n');
    expect((await cli('push', 'cli-project', project, '--replace')).code).toBe(0);
    expect((await cli('build', 'cli-project', '--follow')).code).toBe(0);
    expect((await run(server, env.id, 'sh /env/cli-project/scripts/run.sh')).stdout).toBe('v2\n');

    const listed = await cli('versions', 'cli-project');
    expect(listed.stdout.split('\n').filter(Boolean).map((l) => l.slice(0, 14))).toEqual(['   v1  ready  ', '*  v2  ready  ']);
    const activated = await cli('activate', 'cli-project', '1');
    expect(activated.stdout.trim()).toBe('version 1 active');
    expect((await run(server, env.id, 'sh /env/cli-project/scripts/run.sh')).stdout).toBe('v1\n');
    const json = JSON.parse((await cli('versions', 'cli-project', '--json')).stdout);
    expect(json).toMatchObject({ active: 1, latest: 2 });
  });

  it('should fail a followed build with exit code 1 and say why, and refuse an unfinished activation', async () => {
    const env = await createNamed(server, 'Cli Failing');
    const dir = path.join(project, 'failing');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'setup.sh'), 'echo "doomed"; exit 4\n');
    expect((await cli('push', env.id, dir)).code).toBe(0);
    const built = await cli('build', env.id, '--follow');
    expect(built.code).toBe(1);
    expect(built.stdout).toContain('doomed');
    expect(built.stdout).toContain('version 1 failed: sh setup.sh exited with code 4');
    const activated = await cli('activate', env.id, '1');
    expect(activated.code).toBe(1);
    expect(activated.stderr).toMatch(/failed; only a finished \(ready\) build can be activated/);
  });
});
