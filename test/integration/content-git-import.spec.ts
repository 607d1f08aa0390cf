import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthError } from '../../schemas/errors.ts';
import { EnvironmentContent } from '../../src/content/environment-content.ts';

let base: string;
let repos: string;
let content: EnvironmentContent;

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', '-c', 'init.defaultBranch=main', ...args], { cwd, stdio: 'pipe' });

beforeEach(() => {
  base = mkdtempSync(path.join(tmpdir(), 'berth-git-'));
  repos = mkdtempSync(path.join(tmpdir(), 'berth-git-repos-'));
  content = new EnvironmentContent(path.join(base, 'env'));
});
afterEach(() => {
  rmSync(base, { recursive: true, force: true });
  rmSync(repos, { recursive: true, force: true });
});

/** A bare repository with a `main` branch and a `v2` branch, built from a working clone. */
function makeRepository(): string {
  const bare = path.join(repos, 'project.git');
  const work = path.join(repos, 'work');
  git(repos, 'init', '--bare', bare);
  mkdirSync(work);
  git(work, 'init');
  mkdirSync(path.join(work, 'src'));
  writeFileSync(path.join(work, 'src/main.py'), 'print("main")\n');
  writeFileSync(path.join(work, 'data.bin'), Buffer.from([0, 1, 2, 255, 254, 13, 10]));
  symlinkSync('/etc/passwd', path.join(work, 'passwd'));
  mkdirSync(path.join(work, 'node_modules/left-pad'), { recursive: true });
  writeFileSync(path.join(work, 'node_modules/left-pad/index.js'), 'module.exports = 1;\n');
  git(work, 'add', '-A');
  git(work, 'commit', '-m', 'main');
  git(work, 'push', bare, 'HEAD:main');
  writeFileSync(path.join(work, 'src/main.py'), 'print("v2")\n');
  git(work, 'commit', '-am', 'v2');
  git(work, 'push', bare, 'HEAD:v2');
  return bare;
}

async function refused(promise: Promise<unknown>): Promise<BerthError> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof BerthError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
}

describe('git import', () => {
  it('should run no hooks, even ones a git template would install', async () => {
    const bare = makeRepository();
    const template = path.join(repos, 'template');
    mkdirSync(path.join(template, 'hooks'), { recursive: true });
    writeFileSync(path.join(template, 'hooks/post-checkout'), `#!/bin/sh\ntouch "${path.join(repos, 'HOOK-RAN')}"\n`, { mode: 0o755 });
    process.env.GIT_TEMPLATE_DIR = template;
    try {
      // The hook is live: a plain clone runs it.
      execFileSync('git', ['clone', '-q', bare, path.join(repos, 'plain')], { stdio: 'pipe' });
      expect(existsSync(path.join(repos, 'HOOK-RAN'))).toBe(true);
      rmSync(path.join(repos, 'HOOK-RAN'));
      await content.importGit({ url: `file://${bare}`, ref: 'main' }, { allowLocal: true });
    } finally {
      delete process.env.GIT_TEMPLATE_DIR;
    }
    expect(existsSync(path.join(repos, 'HOOK-RAN'))).toBe(false);
    expect(existsSync(path.join(content.layout.source, 'src/main.py'))).toBe(true);
  });

  it('should clone a ref shallowly, drop .git, links and dependency directories, and count them', async () => {
    const bare = makeRepository();
    const result = await content.importGit({ url: `file://${bare}`, ref: 'main' }, { allowLocal: true });
    expect(result).toMatchObject({ files: 2, bytes: 14 + 7, skipped: 2 });
    expect(Object.fromEntries(result.skippedReasons.map((r) => [r.reason, r.count]))).toEqual({ symlink: 1, dependency_dir: 1 });
    const src = content.layout.source;
    expect(readFileSync(path.join(src, 'src/main.py'), 'utf8')).toBe('print("main")\n');
    expect(readFileSync(path.join(src, 'data.bin')).equals(Buffer.from([0, 1, 2, 255, 254, 13, 10]))).toBe(true);
    for (const gone of ['.git', 'passwd', 'node_modules']) expect(existsSync(path.join(src, gone)), gone).toBe(false);

    await content.importGit({ url: bare, ref: 'v2' }, { allowLocal: true, replace: true });
    expect(readFileSync(path.join(src, 'src/main.py'), 'utf8')).toBe('print("v2")\n');
    expect(execFileSync('ls', ['-A', path.join(base, 'env', 'staging')], { encoding: 'utf8' })).toBe('');
  });

  it('should refuse local repositories unless allowed, odd refs, and URLs that are options', async () => {
    const bare = makeRepository();
    expect((await refused(content.importGit({ url: `file://${bare}` }))).detail.reason).toBe('git_url');
    expect((await refused(content.importGit({ url: bare }))).detail.reason).toBe('git_url');
    expect((await refused(content.importGit({ url: '--upload-pack=touch /tmp/x' }, { allowLocal: true }))).detail.reason).toBe('git_url');
    expect((await refused(content.importGit({ url: 'ext::sh -c touch% /tmp/pwned' }, { allowLocal: true }))).detail.reason).toBe('git_url');
    expect((await refused(content.importGit({ url: `file://${bare}`, ref: '--orphan' }, { allowLocal: true }))).detail.reason).toBe('git_ref');
    expect(existsSync(content.layout.source)).toBe(false);
  });

  it('should report a missing ref as git_failed and write nothing', async () => {
    const bare = makeRepository();
    const error = await refused(content.importGit({ url: `file://${bare}`, ref: 'no-such-branch' }, { allowLocal: true }));
    expect(error.detail).toMatchObject({ reason: 'git_failed' });
    expect(String(error.detail.stderr)).toMatch(/no-such-branch/);
    expect(existsSync(content.layout.source)).toBe(false);
  });

  it('should stop a clone that hangs at its timeout', async () => {
    const sockets: import('node:net').Socket[] = [];
    const server: Server = createServer((socket) => sockets.push(socket)); // accepts and never answers
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const started = Date.now();
      // A loopback host is refused unless allowed (test/security/git-import-ssrf.spec.ts): allowed here.
      const error = await refused(content.importGit({ url: `git://127.0.0.1:${port}/project.git` }, { timeoutMs: 1000, allowHosts: ['127.0.0.1'] }));
      expect(error.detail.reason).toBe('git_timeout');
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
    }
    expect(existsSync(content.layout.source)).toBe(false);
  });

  it('should stop a clone under way once its room runs out, looking while git runs', async () => {
    const sockets: import('node:net').Socket[] = [];
    const server: Server = createServer((socket) => sockets.push(socket)); // a clone that never ends by itself
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    // The data directory's reserve, as the content service passes it: room before the clone, none from the next look.
    const looks: number[] = [];
    const full = new BerthError('storage_full', 'no room left', {});
    const room = async () => {
      looks.push(Date.now());
      if (looks.length > 1) throw full;
    };
    const roomy = new EnvironmentContent(path.join(base, 'roomy'), {}, room);
    try {
      const started = Date.now();
      const error = await refused(roomy.importGit({ url: `git://127.0.0.1:${port}/project.git` }, { timeoutMs: 30_000, allowHosts: ['127.0.0.1'] }));
      expect(error).toBe(full);
      expect(Date.now() - started).toBeLessThan(5_000); // not the 30 s timeout: git was stopped at the look
      expect(looks.length).toBe(2);
    } finally {
      for (const s of sockets) s.destroy();
      server.close();
    }
    expect(existsSync(roomy.layout.source)).toBe(false);
  });
});
