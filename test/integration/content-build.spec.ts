import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runBuild } from '../../src/content/build-runner.ts';
import { EnvironmentContent } from '../../src/content/environment-content.ts';
import { hostToolchain } from '../../src/content/toolchain.ts';
import { removeTree } from '../../src/content/remove-tree.ts';
import { makeReadOnly } from '../../src/content/versions.ts';

let base: string;
let content: EnvironmentContent;

beforeEach(() => {
  base = mkdtempSync(path.join(tmpdir(), 'berth-build-'));
  chmodSync(base, 0o755); // other users (the read-only checks) must reach the version
  content = new EnvironmentContent(path.join(base, 'env'));
});
afterEach(async () => {
  await removeTree(base);
});

/** The host's environment, with the npm registry pointed at a closed port: the build must not need the network. */
const offlineEnv = (): Record<string, string> => ({
  ...(Object.fromEntries(Object.entries(process.env).filter(([, v]) => v !== undefined)) as Record<string, string>),
  npm_config_registry: 'http://127.0.0.1:9/',
  npm_config_cache: path.join(base, 'npm-cache'),
  PIP_INDEX_URL: 'http://127.0.0.1:9/simple',
});

async function write(rel: string, text: string | Buffer, mode?: number): Promise<void> {
  await content.source.write(rel, [Buffer.from(text)]);
  if (mode) chmodSync(path.join(content.layout.source, rel), mode);
}

describe('version snapshot and read-only layer', () => {
  it('should copy the source byte-exact without dependency directories, independent of the source', async () => {
    const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await write('bin/tool', '#!/bin/sh\necho tool\n', 0o755);
    await write('data/blob.bin', binary);
    await write('node_modules/left-pad/index.js', 'laptop install');
    await write('py/.venv/bin/python', 'laptop venv');
    await content.source.mkdir('empty');

    const snap = await content.snapshot(1);
    expect(snap).toEqual({ dir: content.versionDir(1), files: 2 });
    const v1 = content.versionDir(1);
    expect(readFileSync(path.join(v1, 'data/blob.bin')).equals(binary)).toBe(true);
    expect(statSync(path.join(v1, 'bin/tool')).mode & 0o777).toBe(0o755);
    expect(existsSync(path.join(v1, 'node_modules'))).toBe(false);
    expect(existsSync(path.join(v1, 'py/.venv'))).toBe(false);
    expect(lstatSync(path.join(v1, 'empty')).isDirectory()).toBe(true);
    expect(readdirSync(content.layout.versions)).toEqual(['1']); // no partial copy left

    // A copy, not links: the source stays writable and the version does not follow it.
    expect(statSync(path.join(v1, 'data/blob.bin')).ino).not.toBe(statSync(path.join(content.layout.source, 'data/blob.bin')).ino);
    await write('data/blob.bin', 'changed');
    expect(readFileSync(path.join(v1, 'data/blob.bin')).equals(binary)).toBe(true);

    await expect(content.snapshot(1)).rejects.toMatchObject({ code: 'invalid_state' });
  });

  it('should snapshot an environment that has no files yet as an empty version', async () => {
    expect(await content.snapshot(1)).toEqual({ dir: content.versionDir(1), files: 0 });
    expect(readdirSync(content.versionDir(1))).toEqual([]);
  });

  it('should take every write bit away, so a non-root writer fails and a read-only mount stops root too', async () => {
    await write('scripts/run.sh', '#!/bin/sh\n', 0o755);
    await write('notes.txt', 'n');
    const { dir } = await content.snapshot(1);
    await makeReadOnly(dir);
    expect(statSync(path.join(dir, 'scripts/run.sh')).mode & 0o7777).toBe(0o555);
    expect(statSync(path.join(dir, 'notes.txt')).mode & 0o7777).toBe(0o444);
    expect(statSync(path.join(dir, 'scripts')).mode & 0o7777).toBe(0o555);
    expect(statSync(dir).mode & 0o7777).toBe(0o555);

    // Tests run as root, which ignores permission bits: show the bits working for another user...
    if (process.getuid?.() === 0) {
      const asNobody = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', 'sh', '-c', `echo x > ${dir}/notes.txt || exit 7; touch ${dir}/new || exit 8`], { encoding: 'utf8' });
      expect(asNobody.status).toBe(7);
      expect(asNobody.stderr).toMatch(/Permission denied/);
    }
    // ...and the enforcement sessions get: a read-only bind mount, which refuses even root.
    const roots = ['/usr', '/bin', '/lib', '/lib64', '/etc'].filter((p) => existsSync(p));
    const binds = roots.flatMap((p) => (lstatSync(p).isSymbolicLink() ? ['--symlink', readlink(p), p] : ['--ro-bind', p, p]));
    const inSandbox = spawnSync(
      'bwrap',
      [...binds, '--dev', '/dev', '--proc', '/proc', '--ro-bind', dir, '/env/project', 'sh', '-c', 'cat /env/project/notes.txt; echo x > /env/project/notes.txt || exit 7'],
      { encoding: 'utf8' },
    );
    expect(inSandbox.stdout).toBe('n');
    expect(inSandbox.status).toBe(7);
    expect(inSandbox.stderr).toMatch(/Read-only file system/);
    expect(readFileSync(path.join(dir, 'notes.txt'), 'utf8')).toBe('n');
  });
});

function readlink(p: string): string {
  return execFileSync('readlink', [p], { encoding: 'utf8' }).trim();
}

describe('build runner', () => {
  it('should run npm install for a package.json without dependencies, then setup.sh, offline, and log their output', async () => {
    await write('package.json', JSON.stringify({ name: 'studio', version: '1.0.0' }));
    await write('setup.sh', 'echo "setup ran in $PROJECT_ROOT"\ncase "$PATH" in *node_modules/.bin*) echo "bin on path";; esac\necho made > made-by-setup.txt\n');
    const { dir } = await content.snapshot(1);
    const live: string[] = [];
    const result = await runBuild({ versionDir: dir, run: hostToolchain, env: offlineEnv(), stepTimeoutMs: 120_000, onLog: (t) => live.push(t) });
    expect(result.error).toBe('');
    expect(result.ok).toBe(true);
    expect(result.log).toMatch(/^\$ npm install --no-audit --no-fund --prefer-offline --no-update-notifier\n(.|\n)*up to date/);
    expect(result.log).toContain(`$ sh setup.sh\nsetup ran in ${dir}\nbin on path\n`);
    expect(live.join('')).toBe(result.log);
    expect(result.packages).toEqual([]);
    expect(readFileSync(path.join(dir, 'made-by-setup.txt'), 'utf8')).toBe('made\n');
    expect(existsSync(path.join(dir, 'package-lock.json'))).toBe(true);
    expect(result.sizeBytes).toBeGreaterThan(0);
    await makeReadOnly(dir);
  }, 120_000);

  it('should list the npm packages it installed (a local dependency, offline)', async () => {
    await write('package.json', JSON.stringify({ name: 'studio', version: '1.0.0', dependencies: { 'local-dep': 'file:./vendor/local-dep' } }));
    await write('vendor/local-dep/package.json', JSON.stringify({ name: 'local-dep', version: '2.3.4' }));
    const { dir } = await content.snapshot(1);
    const result = await runBuild({ versionDir: dir, run: hostToolchain, env: offlineEnv(), stepTimeoutMs: 120_000 });
    expect(result.ok).toBe(true);
    expect(result.log).toMatch(/added 1 package/);
    expect(result.packages).toEqual([{ manager: 'npm', name: 'local-dep', version: '2.3.4' }]);
    expect(existsSync(path.join(dir, 'node_modules/local-dep'))).toBe(true);
  }, 120_000);

  it('should create a venv for requirements.txt and list what pip installed', async () => {
    await write('requirements.txt', '# nothing to fetch: the build must still make the venv\n');
    const { dir } = await content.snapshot(1);
    const result = await runBuild({ versionDir: dir, run: hostToolchain, env: offlineEnv(), stepTimeoutMs: 120_000 });
    expect(result.error).toBe('');
    expect(result.log).toContain('$ python3 -m venv .venv\n');
    expect(result.log).toContain(`$ ${dir}/.venv/bin/python -m pip install --no-input -r requirements.txt\n`);
    expect(existsSync(path.join(dir, '.venv/bin/python'))).toBe(true);
    expect(result.packages.some((p) => p.manager === 'pip' && p.name === 'pip')).toBe(true);
  }, 120_000);

  it('should fail with the step and exit code when setup.sh fails, keeping its output, and stop there', async () => {
    await write('setup.sh', 'echo "about to fail"\necho "boom" >&2\nexit 3\n');
    await write('package.json', JSON.stringify({ name: 'x', version: '1.0.0' }));
    const { dir } = await content.snapshot(1);
    const result = await runBuild({ versionDir: dir, run: hostToolchain, env: offlineEnv() });
    expect(result.ok).toBe(false);
    expect(result.error).toBe('sh setup.sh exited with code 3');
    expect(result.log).toContain('about to fail\n');
    expect(result.log).toContain('boom\n');
    expect(result.log.trimEnd().endsWith('sh setup.sh exited with code 3')).toBe(true);
    expect(result.packages).toEqual([]);
  }, 120_000);

  it('should report a step that never started, and one that ran out of time', async () => {
    await write('setup.sh', 'sleep 30\n');
    const { dir } = await content.snapshot(1);
    const timedOut = await runBuild({ versionDir: dir, run: hostToolchain, env: offlineEnv(), stepTimeoutMs: 500 });
    expect(timedOut).toMatchObject({ ok: false, error: 'sh setup.sh timed out' });
    const noShell = await runBuild({ versionDir: dir, run: hostToolchain, env: { PATH: path.join(base, 'empty-path') } });
    expect(noShell.ok).toBe(false);
    expect(noShell.error).toMatch(/^sh setup.sh could not start: .*ENOENT/);
  });
});
