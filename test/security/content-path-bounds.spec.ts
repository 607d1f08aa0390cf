/**
 * Issue 10, finding 5 (startup denial), against a real `berth serve`: a source path just under PATH_MAX was accepted,
 * a replacing import then moved the tree into staging past PATH_MAX, and every later start died on ENAMETOOLONG while
 * clearing staging. Now a path that would lie too deep anywhere Berth moves it is `path_too_long`, and trees past
 * PATH_MAX planted in the data directory (an older Berth, a build's own commands) are removed at start without
 * stopping it; what cannot be removed at all is logged once per start.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { craftTar } from '../unit/content/crafted-tar.ts';
import { createEnvironment, startServer, type BerthServer } from '../e2e/berth-server.ts';
import { answer, expectError, send } from '../e2e/content-client.ts';

let server: BerthServer | undefined;
afterEach(async () => {
  if (!server) return;
  await server.stop('SIGKILL');
  execFileSync('rm', ['-rf', server.dataDir]); // GNU rm walks trees deeper than PATH_MAX; rmSync does not
  await server.close();
  server = undefined;
});

const PATH_MAX = 4096;
const envDir = (s: BerthServer, id: string) => path.join(s.dataDir, 'environments', id);

/** 250-byte segments (the last one shorter) making `<root>/<path>` `total` bytes long: just under PATH_MAX. */
function deepPath(root: string, total = PATH_MAX - 6): string {
  const segments: string[] = [];
  let room = total - Buffer.byteLength(root) - 1;
  while (room > 0) {
    const length = Math.min(250, room);
    segments.push(String.fromCharCode(97 + (segments.length % 26)).repeat(length));
    room -= length + 1;
  }
  return segments.join('/');
}

/** Makes a chain of 250-byte directories below `dir` reaching past PATH_MAX, with a file at the bottom (relative chdirs). */
function plantDeepTree(dir: string, depth = 20): void {
  mkdirSync(dir, { recursive: true });
  const script = 'import os, sys\nos.chdir(sys.argv[1])\nfor _ in range(int(sys.argv[2])):\n    os.mkdir("d" * 250)\n    os.chdir("d" * 250)\nopen("file", "w").write("bottom")\n';
  execFileSync('python3', ['-c', script, dir, String(depth)]);
}

describe('content paths are bounded so that nothing lands past PATH_MAX', () => {
  it('should refuse a directory too deep to move (path_too_long), and start again after a replacing import', async () => {
    server = await startServer();
    const env = await createEnvironment(server);
    const deep = deepPath(path.join(envDir(server, env), 'source'));
    expect(deep.split('/').length).toBeGreaterThanOrEqual(15);

    const detail = await expectError(server.call(`/v1/environments/${env}/directories`, { body: { path: deep } }), 400, 'environment_invalid');
    expect(detail).toMatchObject({ reason: 'path_too_long' });
    expect(detail.max_bytes).toBeLessThan(PATH_MAX - Buffer.byteLength(envDir(server, env)) - 100);
    const put = await expectError(send(server, 'PUT', `/v1/environments/${env}/files/${deep}/f.txt`, 'x'), 400, 'environment_invalid');
    expect(put.reason).toBe('path_too_long');

    // A member past the bound is dropped and counted; the rest lands.
    const archive = craftTar([
      { name: 'keep.txt', content: Buffer.from('kept\n') },
      { name: 'deep', pax: { path: `${deep}/f.txt` }, content: Buffer.from('too deep\n') },
    ]);
    const imported = await answer(await send(server, 'POST', `/v1/environments/${env}/import?replace=true`, archive));
    expect(imported.status, JSON.stringify(imported.body).slice(0, 300)).toBe(200);
    expect(imported.body).toMatchObject({ files: 1, skipped: 1, skippedReasons: [{ reason: 'path_too_long', count: 1 }] });

    await server.restart();
    expect((await server.call('/healthz', { token: null })).status).toBe(200);
    expect((await server.json(`/v1/environments/${env}/files`)).entries.map((e: { path: string }) => e.path)).toEqual(['keep.txt']);
  });

  it('should start over trees past PATH_MAX left in staging, a partial version and a deleted environment, and remove them', async () => {
    server = await startServer();
    const env = await createEnvironment(server);
    const root = envDir(server, env);
    await server.stop();
    plantDeepTree(path.join(root, 'staging', 'import-old'));
    plantDeepTree(path.join(root, 'versions', '.partial-1-old'));
    const orphan = path.join(server.dataDir, 'environments', `henv_${'0'.repeat(32)}`);
    plantDeepTree(path.join(orphan, 'source'));
    execFileSync('chmod', ['-R', 'a-w', path.join(orphan, 'source')]); // as a version is: read-only

    await server.restart();
    expect((await server.call('/healthz', { token: null })).status).toBe(200);
    expect(existsSync(path.join(root, 'staging'))).toBe(false);
    expect(readdirSync(path.join(root, 'versions'))).toEqual([]);
    expect(existsSync(orphan)).toBe(false);
    expect((await server.json(`/v1/environments/${env}`)).id).toBe(env);
  });

  it('should start over a source tree past PATH_MAX and list it up to the bound', async () => {
    server = await startServer();
    const env = await createEnvironment(server);
    await server.stop();
    plantDeepTree(path.join(envDir(server, env), 'source'));

    await server.restart();
    const listed = (await server.json(`/v1/environments/${env}/files`)).entries.map((e: { path: string }) => e.path);
    expect(listed.length).toBeGreaterThan(5);
    expect(Math.max(...listed.map((p: string) => Buffer.byteLength(p)))).toBeLessThan(PATH_MAX - Buffer.byteLength(envDir(server, env)));
    expect((await server.json(`/v1/environments/${env}`)).id).toBe(env);
    // A replacing import moves it aside past PATH_MAX and still removes it; the next start is clean.
    const imported = await answer(await send(server, 'POST', `/v1/environments/${env}/import?replace=true`, craftTar([{ name: 'a.txt', content: Buffer.from('a') }])));
    expect(imported.status, JSON.stringify(imported.body).slice(0, 300)).toBe(200);
    expect(readdirSync(path.join(envDir(server, env), 'staging'))).toEqual([]);
    await server.restart();
    expect((await server.json(`/v1/environments/${env}/files`)).entries.map((e: { path: string }) => e.path)).toEqual(['a.txt']);
  });

  it('should fail a build whose commands make a tree past PATH_MAX in the version, and start again after', async () => {
    server = await startServer();
    const env = await createEnvironment(server);
    const deepen = 'import os\nfor _ in range(20):\n    os.mkdir("d" * 250)\n    os.chdir("d" * 250)\n';
    expect((await answer(await send(server, 'PUT', `/v1/environments/${env}/files/deepen.py`, deepen))).status).toBe(200);
    expect((await answer(await send(server, 'PUT', `/v1/environments/${env}/files/setup.sh`, 'python3 deepen.py\n'))).status).toBe(200);
    const { version } = await server.json(`/v1/environments/${env}/build`, { method: 'POST' });
    let record: any;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
      record = await server.json(`/v1/environments/${env}/builds/${version}`);
      if (record.status !== 'building') break;
    }
    expect(record).toMatchObject({ status: 'failed', error: expect.stringContaining('ENAMETOOLONG') });
    expect(JSON.stringify(record)).not.toContain(server.dataDir);
    expect(readdirSync(path.join(envDir(server, env), 'versions'))).toEqual([]);
    await server.restart();
    expect((await server.call('/healthz', { token: null })).status).toBe(200);
  });

  it.skipIf(process.getuid?.() !== 0)('should start over what it cannot remove at all (a mount point), logging it once', async () => {
    server = await startServer([], { BERTH_LOG_LEVEL: 'warn' });
    const env = await createEnvironment(server);
    const busy = path.join(envDir(server, env), 'staging', 'busy');
    await server.stop();
    mkdirSync(busy, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', 'berth-test', busy]);
    try {
      await server.restart();
      expect((await server.call('/healthz', { token: null })).status).toBe(200);
      const warnings = server.process.stderr().split('\n').filter((line) => line.includes('content cleanup left'));
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0])).toMatchObject({ environmentId: env, step: 'clear_staging', code: 'EBUSY' });
    } finally {
      execFileSync('umount', [busy]);
    }
  });
});
