/**
 * Seed 001 §4 and §6 end to end against a real `berth serve` (native provider): builds (offline npm, pip into .venv,
 * setup.sh; the installers' own log), one build at a time, failed builds changing nothing, activation and rollback,
 * and what an execution sees: the active version read-only at /env/<slug>, its PATH, the version on its record, kept
 * for its whole run; environment_not_ready before anything starts; a build cannot read another environment.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finished, running, startServer, submit, tokens, type BerthServer } from './berth-server.ts';
import { build, createNamed, expectError, putFile, run, send, waitBuild } from './content-client.ts';

let server: BerthServer;

beforeAll(async () => {
  // No registry answers: a build that needed the network would fail.
  server = await startServer([], { npm_config_registry: 'http://127.0.0.1:9/', PIP_INDEX_URL: 'http://127.0.0.1:9/simple' });
});
afterAll(() => server?.close());

const versionDir = (env: string, version: number) => path.join(server.dataDir, 'environments', env, 'versions', String(version));
const startBuild = (env: string) => server.json(`/v1/environments/${env}/build`, { method: 'POST' });

describe('builds (seed 001 §4)', () => {
  it('should build package.json with npm, requirements.txt into .venv and setup.sh offline, logging the installers\' own output', async () => {
    const env = await createNamed(server, 'Offline Build');
    await putFile(server, env.id, 'package.json', JSON.stringify({ name: 'offline-build', version: '1.0.0', private: true }));
    await putFile(server, env.id, 'requirements.txt', '# nothing to install\n');
    await putFile(server, env.id, 'setup.sh', 'echo "setup.sh says hello from $PROJECT_ROOT"\necho built > built.txt\n');
    await putFile(server, env.id, 'node_modules/laptop/index.js', 'not copied into a build');
    const record = await build(server, env.id);
    expect(record, record.log).toMatchObject({ object: 'build', version: 1, status: 'ready', error: '', active: true });
    expect(record.log).toContain('$ npm install');
    expect(record.log).toMatch(/up to date|added \d+ package/); // npm's own words
    expect(record.log).toContain('$ python3 -m venv .venv');
    expect(record.log).toContain('setup.sh says hello from /env/offline-build');
    expect(record.finished_at).toBeGreaterThanOrEqual(record.started_at);
    expect(record.started_at).toBeLessThan(10_000_000_000); // seconds, as the seed writes them
    expect(record.size).toBeGreaterThan(0);
    expect(record.packages.some((p: { manager: string }) => p.manager === 'pip')).toBe(true);

    const view = await server.json(`/v1/environments/${env.id}`);
    expect(view).toMatchObject({ status: 'ready', version: 1, latestVersion: 1, build: { version: 1, status: 'ready', error: '' } });
    expect(view.versions).toEqual([expect.objectContaining({ version: 1, status: 'ready', active: true })]);
    const versions = await server.json(`/v1/environments/${env.id}/versions`);
    expect(versions).toMatchObject({ environment: env.id, active: 1, latest: 1, versions: [{ version: 1, status: 'ready', active: true }] });
    expect(existsSync(path.join(versionDir(env.id, 1), 'node_modules', 'laptop'))).toBe(false);
    expect(existsSync(path.join(versionDir(env.id, 1), '.venv', 'bin', 'python'))).toBe(true);
  });

  it('should run one build at a time and refuse DELETE while it runs (environment_busy); status says building meanwhile', async () => {
    const env = await createNamed(server, 'Busy Build');
    await putFile(server, env.id, 'setup.sh', 'sleep 3\n');
    const first = await startBuild(env.id);
    expect(first).toMatchObject({ version: 1, status: 'building' });
    expect((await server.json(`/v1/environments/${env.id}`)).status).toBe('building');
    await expectError(send(server, 'POST', `/v1/environments/${env.id}/build`), 409, 'environment_busy');
    await expectError(send(server, 'DELETE', `/v1/environments/${env.id}`), 409, 'environment_busy');
    await expectError(send(server, 'POST', `/v1/environments/${env.id}/versions/1/activate`), 409, 'environment_not_ready');
    expect((await waitBuild(server, env.id, 1)).status).toBe('ready');
    expect((await send(server, 'DELETE', `/v1/environments/${env.id}`)).status).toBe(204);
    await expectError(send(server, 'GET', `/v1/environments/${env.id}`), 404, 'environment_not_found');
    expect(existsSync(path.join(server.dataDir, 'environments', env.id))).toBe(false); // every version deleted
  });

  it('should leave the previous version active and running executions untouched when a build fails', async () => {
    const env = await createNamed(server, 'Failing Build');
    await putFile(server, env.id, 'marker.txt', 'one');
    expect((await build(server, env.id)).status).toBe('ready');
    const reader = await submit(server, env.id, 'sleep 3; cat /env/failing-build/marker.txt');
    await running(server, reader.id);

    await putFile(server, env.id, 'marker.txt', 'two');
    await putFile(server, env.id, 'setup.sh', 'echo about to fail; exit 3\n');
    const failed = await build(server, env.id);
    expect(failed).toMatchObject({ version: 2, status: 'failed', error: 'sh setup.sh exited with code 3', active: false });
    expect(failed.log).toContain('about to fail');
    expect(existsSync(versionDir(env.id, 2))).toBe(false);

    const view = await server.json(`/v1/environments/${env.id}`);
    expect(view).toMatchObject({ status: 'ready', version: 1, latestVersion: 2, build: { version: 2, status: 'failed' } });
    const done = await finished(server, reader.id);
    expect(done).toMatchObject({ status: 'exited', exitCode: 0, version: 1 });
    expect(await (await server.call(`/v1/executions/${reader.id}/output`)).text()).toBe('one');
    expect((await run(server, env.id, 'cat /env/failing-build/marker.txt')).stdout).toBe('one');
  });

  it('should say failed when no version is active and the last build failed', async () => {
    const env = await createNamed(server, 'Never Built');
    await putFile(server, env.id, 'setup.sh', 'exit 1\n');
    expect((await build(server, env.id)).status).toBe('failed');
    expect(await server.json(`/v1/environments/${env.id}`)).toMatchObject({ status: 'failed', version: null, latestVersion: 1 });
  });

  it('should activate an earlier version for the next execution only, without rebuilding', async () => {
    const env = await createNamed(server, 'Roll Back');
    await putFile(server, env.id, 'marker.txt', 'one');
    await build(server, env.id);
    await putFile(server, env.id, 'marker.txt', 'two');
    await build(server, env.id);
    const during = await submit(server, env.id, 'sleep 2; cat /env/roll-back/marker.txt');
    await running(server, during.id);

    const versions = await server.json(`/v1/environments/${env.id}/versions/1/activate`, { method: 'POST' });
    expect(versions).toMatchObject({ active: 1, latest: 2 });
    expect(versions.versions.map((v: { active: boolean }) => v.active)).toEqual([true, false]);
    expect(await finished(server, during.id)).toMatchObject({ status: 'exited', version: 2 });
    expect(await (await server.call(`/v1/executions/${during.id}/output`)).text()).toBe('two');
    const next = await run(server, env.id, 'cat /env/roll-back/marker.txt');
    expect(next.stdout).toBe('one');
    expect(next.record.version).toBe(1);
    expect((await server.json(`/v1/environments/${env.id}/versions`)).latest).toBe(2); // nothing was rebuilt

    await expectError(send(server, 'POST', `/v1/environments/${env.id}/versions/9/activate`), 404, 'not_found');
    await expectError(send(server, 'POST', `/v1/environments/${env.id}/versions/1/activate`, undefined, {}, tokens.bob), 404, 'environment_not_found');
  });

  it('should name an unknown build not_found and keep builds to their scope', async () => {
    const env = await createNamed(server, 'Build Scope');
    await expectError(send(server, 'GET', `/v1/environments/${env.id}/builds/1`), 404, 'not_found');
    await expectError(send(server, 'POST', `/v1/environments/${env.id}/build`, undefined, {}, tokens.bob), 404, 'environment_not_found');
    await expectError(send(server, 'GET', `/v1/environments/${env.id}/versions`, undefined, {}, tokens.bob), 404, 'environment_not_found');
  });

  it('should not let a build read another environment\'s files, nor Berth\'s data directory', async () => {
    const other = await createNamed(server, 'Other Secrets');
    await putFile(server, other.id, 'secret.txt', 'the-other-secret');
    const secret = path.join(server.dataDir, 'environments', other.id, 'source', 'secret.txt');
    const env = await createNamed(server, 'Curious Build');
    await putFile(server, env.id, 'setup.sh', `cat ${secret} || echo "no secret here"\nls ${server.dataDir} | wc -l\ncat ${server.dataDir}/token || echo "no token here"\n`);
    const record = await build(server, env.id);
    expect(record.log).not.toContain('the-other-secret');
    expect(record.log).toContain('no secret here');
    expect(record.log).toContain('no token here');
  });
});

describe('what an execution sees (seed 001 §6)', () => {
  it('should mount the active version read-only at /env/<slug>, with PATH, PYTHONPATH, NODE_PATH and PROJECT_ROOT, naming the version', async () => {
    const env = await createNamed(server, 'Session View');
    await putFile(server, env.id, 'package.json', JSON.stringify({ name: 'session-view', version: '1.0.0', private: true }));
    await putFile(server, env.id, 'scripts/hello.sh', 'echo hello from the project\n');
    await build(server, env.id);
    const mount = '/env/session-view';
    const seen = await run(server, env.id, 'echo "$PATH"; echo "$PYTHONPATH"; echo "$NODE_PATH"; echo "$PROJECT_ROOT"; sh /env/session-view/scripts/hello.sh');
    const [pathVar, pythonPath, nodePath, root, hello] = seen.stdout.trim().split('\n');
    expect(pathVar!.startsWith(`${mount}/.venv/bin:${mount}/node_modules/.bin:`)).toBe(true);
    expect(pythonPath!.startsWith(mount)).toBe(true);
    expect(nodePath!.startsWith(mount)).toBe(true);
    expect(root).toBe(mount);
    expect(hello).toBe('hello from the project');
    expect(seen.record).toMatchObject({ status: 'exited', exitCode: 0, version: 1 });
  });

  it('should refuse writes under /env/<slug>, even as root, and leave the version as built', async () => {
    const env = await createNamed(server, 'Read Only');
    await putFile(server, env.id, 'data.txt', 'pristine');
    await build(server, env.id);
    const attempt = await run(server, env.id, 'echo tampered > /env/read-only/data.txt; echo "write=$?"; touch /env/read-only/new; echo "touch=$?"; rm -f /env/read-only/data.txt; echo "rm=$?"; id -u');
    expect(attempt.stdout).toMatch(/write=[1-9]/);
    expect(attempt.stdout).toMatch(/touch=[1-9]/);
    expect(attempt.stderr).toMatch(/Read-only file system/);
    expect((await run(server, env.id, 'cat /env/read-only/data.txt')).stdout).toBe('pristine');
    // A contained profile gets the same mount through the executor's own sandbox.
    const contained = await createNamed(server, 'Read Only Contained', tokens.alice, { contain: true });
    await putFile(server, contained.id, 'data.txt', 'pristine');
    await build(server, contained.id);
    const inside = await run(server, contained.id, 'cat /env/read-only-contained/data.txt; echo x > /env/read-only-contained/data.txt; echo "write=$?"');
    expect(inside.stdout).toMatch(/^pristine\s*write=[1-9]/);
  });

  it('should refuse an execution before anything starts when there are files but no active version, or no environment', async () => {
    const env = await createNamed(server, 'Not Ready');
    await putFile(server, env.id, 'run.sh', 'echo hi\n');
    const operationId = `not-ready-${Date.now()}`;
    const body = JSON.stringify({ operationId, environment: env.id, command: 'echo should not run' });
    await expectError(send(server, 'POST', '/v1/executions', body, { 'content-type': 'application/json' }), 409, 'environment_not_ready');
    expect(await server.json(`/v1/executions?operationId=${operationId}`)).toEqual([]);
    expect((await server.json(`/v1/environments/${env.id}`)).allocation).toBeNull(); // nothing was allocated
    const missing = JSON.stringify({ operationId, environment: `henv_${'9'.repeat(32)}`, command: 'true' });
    await expectError(send(server, 'POST', '/v1/executions', missing, { 'content-type': 'application/json' }), 404, 'environment_not_found');
    // An environment without content runs as before, with no version.
    const plain = await createNamed(server, 'No Content');
    expect((await run(server, plain.id, 'echo plain')).record.version).toBeUndefined();
  });

  it('should change nothing a session sees when the source is written, until the next build', async () => {
    const env = await createNamed(server, 'Write Then Build');
    await putFile(server, env.id, 'v.txt', 'built');
    await build(server, env.id);
    await putFile(server, env.id, 'v.txt', 'edited');
    await putFile(server, env.id, 'added.txt', 'new');
    expect((await run(server, env.id, 'cat /env/write-then-build/v.txt; echo; ls /env/write-then-build')).stdout).toBe('built\nv.txt\n');
    await build(server, env.id);
    expect((await run(server, env.id, 'cat /env/write-then-build/v.txt')).stdout).toBe('edited');
  });

  it('should advertise the environments capability', async () => {
    expect((await server.json('/v1/capabilities')).capabilities.environments).toBe(true);
  });
});
