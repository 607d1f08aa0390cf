/**
 * A git bomb against a real `berth serve`: a repository of a few kilobytes whose commit names one 1 MiB blob 1,536
 * times (48 directories of 32 files, the trees sharing their objects) checks out to 1.5 GiB. The import cloned and
 * checked out first and applied the caps after, so every such import wrote the whole tree to the server's disk (a
 * million-fold one: until the disk was full or the 120 s timeout) before it was refused. Now the commit's tree is
 * listed from the objects and held to the caps before anything is checked out: refused `too_large`, the staging
 * directory never holds more than the clone; an ordinary repository still imports.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, startServer, type BerthServer } from '../e2e/berth-server.ts';
import { answer } from '../e2e/content-client.ts';
import { makeBareRepository, startGitHttpServer, type GitHttpServer } from './git-http-server.ts';

const MiB = 1024 * 1024;
let repos: string;
let listener: GitHttpServer;
let server: BerthServer;

const git = (cwd: string, args: string[], input?: string) => execFileSync('git', args, { cwd, input, encoding: 'utf8' }).trim();

/** `<root>/bomb.git`: main's tree is 48 directories of 32 names for one blob of 1 MiB of zeros. */
function makeBomb(root: string): void {
  const bare = path.join(root, 'bomb.git');
  execFileSync('git', ['init', '--bare', '-q', bare]);
  const zeros = path.join(root, 'zeros');
  writeFileSync(zeros, Buffer.alloc(MiB));
  const blob = git(bare, ['hash-object', '-w', zeros]);
  const files = Array.from({ length: 32 }, (_, i) => `100644 blob ${blob}\tf${i}\n`).join('');
  const inner = git(bare, ['mktree'], files);
  const dirs = Array.from({ length: 48 }, (_, i) => `040000 tree ${inner}\td${i}\n`).join('');
  const top = git(bare, ['mktree'], dirs);
  const commit = execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.com', 'commit-tree', top, '-m', 'bomb'], { cwd: bare, encoding: 'utf8' }).trim();
  git(bare, ['update-ref', 'refs/heads/main', commit]);
  git(bare, ['symbolic-ref', 'HEAD', 'refs/heads/main']);
}

beforeAll(async () => {
  repos = mkdtempSync(path.join(tmpdir(), 'berth-git-bomb-'));
  makeBareRepository(repos);
  makeBomb(repos);
  listener = await startGitHttpServer({ projectRoot: repos });
  server = await startServer([], { BERTH_GIT_ALLOW_HOSTS: '127.0.0.1' });
});
afterAll(async () => {
  await Promise.all([server?.close(), listener?.close()]);
  rmSync(repos, { recursive: true, force: true });
});

/** Bytes under `dir` now (du, apparent sizes), 0 when it is gone. */
function bytesUnder(dir: string): Promise<number> {
  return new Promise((resolve) => {
    const du = spawn('du', ['-sb', dir], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    du.stdout.on('data', (c: Buffer) => (out += c.toString()));
    du.on('close', () => resolve(Number(out.split('\t')[0]) || 0));
  });
}

describe('a git bomb', () => {
  it('is refused from its listing, before a byte of it is checked out', { timeout: 180_000 }, async () => {
    const env = await createEnvironment(server);
    const staging = path.join(server.dataDir, 'environments', env, 'staging');
    let peak = 0;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        peak = Math.max(peak, await bytesUnder(staging));
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const result = await answer(await server.call(`/v1/environments/${env}/import`, { body: { git: { url: `http://127.0.0.1:${listener.port}/bomb.git` } } })).finally(async () => {
      watching = false;
      await watch;
    });
    expect({ status: result.status, code: result.body?.error?.code, reason: result.body?.error?.detail?.reason }, JSON.stringify(result.body)).toEqual({
      status: 400,
      code: 'environment_invalid',
      reason: 'too_large',
    });
    expect(peak, 'bytes in staging at the peak').toBeLessThan(64 * MiB);
    const tree = await server.json(`/v1/environments/${env}/files`);
    expect(tree.files.count).toBe(0);
  });

  it('leaves an ordinary repository importable, checked out whole', async () => {
    const env = await createEnvironment(server);
    const result = await answer(await server.call(`/v1/environments/${env}/import`, { body: { git: { url: `http://127.0.0.1:${listener.port}/project.git` } } }));
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    expect(result.body).toMatchObject({ files: 1 });
    const file = await server.call(`/v1/environments/${env}/files/README.md`);
    expect(await file.text()).toBe('# internal\n');
  });
});
