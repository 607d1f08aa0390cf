/**
 * Seed 001 §4, §6 and §9 on Docker Environments, end to end against a real `berth serve` and the test engine: the
 * active version bound read-only at /env/<slug> in the allocation's container (with its PATH and PROJECT_ROOT, the
 * version on the record), a newly active version taking effect for the next execution only (an allocation still
 * busy keeps its version, and says so), builds inside the Environment's own image as UID 1000 (a missing installer
 * named in the log), builds that cannot read another environment, and an interrupted build's container removed.
 */
import { statSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { dockerAvailable, rawDocker } from '../integration/docker-env.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { finished, running, startServer, submit, type BerthServer } from './berth-server.ts';
import { build, createNamed, putFile, run, waitBuild } from './content-client.ts';

let server: BerthServer;

beforeAll(async () => {
  if (dockerAvailable) server = await startServer();
});
afterAll(() => server?.close());

const docker = { provider: 'docker' };
const versionDir = (env: string, version: number) => path.join(server.dataDir, 'environments', env, 'versions', String(version));
const containersOf = (label: string, value: string) => rawDocker.listContainers({ all: true, filters: { label: [`${label}=${value}`] } });

/** Resolves with the log once it contains `text` (the build is running it). */
async function logShows(env: string, version: number, text: string): Promise<void> {
  await waitFor(async () => (await server.json<{ log: string }>(`/v1/environments/${env}/builds/${version}`)).log, {
    until: (log) => log.includes(text),
    timeoutMs: 60_000,
    intervalMs: 50,
    what: `build ${version} to log ${text}`,
  });
}

describe.skipIf(!dockerAvailable)('content on Docker environments (seed 001 §4, §6)', () => {
  it('should build inside the image as UID 1000 and bind the version read-only at /env/<slug>, with its PATH', async () => {
    const env = await createNamed(server, 'Docker View', undefined, docker);
    await putFile(server, env.id, 'marker.txt', 'one');
    await putFile(
      server,
      env.id,
      'setup.sh',
      [
        'echo "setup ran as $(id -u) on $(uname -n) in $PWD"',
        'id -u > built-by.txt',
        'uname -a > uname.txt',
        'mkdir -p .venv/bin',
        'printf "#!/bin/sh\\necho venv tool ran\\n" > .venv/bin/venv-tool',
        'chmod +x .venv/bin/venv-tool',
      ].join('\n'),
    );
    const record = await build(server, env.id);
    expect(record, record.log).toMatchObject({ version: 1, status: 'ready', active: true });
    expect(record.log).toContain('$ sh setup.sh');
    // berth-build is the build container's host name: the script ran in the image, not on this host.
    expect(record.log).toContain('setup ran as 1000 on berth-build in /env/docker-view');
    expect(readFileSync(path.join(versionDir(env.id, 1), 'built-by.txt'), 'utf8').trim()).toBe('1000');
    const version = statSync(versionDir(env.id, 1));
    expect({ uid: version.uid, mode: version.mode & 0o777 }).toEqual({ uid: process.getuid!(), mode: 0o555 }); // taken back, read-only
    expect(await containersOf(LABEL.buildId, `${env.id}-1`)).toEqual([]); // the build container is gone

    const seen = await run(
      server,
      env.id,
      'cat /env/docker-view/marker.txt; echo; echo "$PROJECT_ROOT|$PYTHONPATH|$NODE_PATH"; echo "$PATH"; venv-tool; id -u',
    );
    expect(seen.record, seen.stderr).toMatchObject({ status: 'exited', exitCode: 0, version: 1 });
    const [marker, roots, pathLine, tool, uid] = seen.stdout.trim().split('\n');
    expect(marker).toBe('one');
    expect(roots).toBe('/env/docker-view|/env/docker-view|/env/docker-view/node_modules');
    expect(pathLine.startsWith('/env/docker-view/.venv/bin:/env/docker-view/node_modules/.bin:')).toBe(true);
    expect(pathLine).toContain('/bin'); // the container's own PATH follows
    expect([tool, uid]).toEqual(['venv tool ran', '1000']);

    const writes = await run(
      server,
      env.id,
      'for p in /env/docker-view/new.txt /env/docker-view/marker.txt; do (echo x > "$p") 2>&1 || echo "refused $p"; done; rm -f /env/docker-view/uname.txt 2>&1 || echo refused rm',
    );
    expect(writes.stdout).toContain('refused /env/docker-view/new.txt');
    expect(writes.stdout).toContain('refused /env/docker-view/marker.txt');
    expect(writes.stdout).toContain('refused rm');
    expect(writes.stdout).toMatch(/Read-only file system|Permission denied/);
    expect(readFileSync(path.join(versionDir(env.id, 1), 'marker.txt'), 'utf8')).toBe('one');

    const [container] = await containersOf(LABEL.environmentId, env.id);
    const info = await rawDocker.getContainer(container.Id).inspect();
    expect(info.Config.Labels[LABEL.contentVersion]).toBe('1');
    expect(info.Mounts.find((m) => m.Destination === '/env/docker-view')).toMatchObject({ Type: 'bind', Source: versionDir(env.id, 1), RW: false });
  }, 120_000);

  it('should make an activated version take effect for the next execution only; a busy allocation keeps its own', async () => {
    const env = await createNamed(server, 'Docker Roll Back', undefined, docker);
    await putFile(server, env.id, 'marker.txt', 'one');
    expect((await build(server, env.id)).status).toBe('ready');
    await putFile(server, env.id, 'marker.txt', 'two');
    expect((await build(server, env.id)).status).toBe('ready');
    const first = await run(server, env.id, 'cat /env/docker-roll-back/marker.txt');
    expect([first.stdout, first.record.version], first.stderr + JSON.stringify(first.record)).toEqual(['two', 2]);

    const during = await submit(server, env.id, 'sleep 5; cat /env/docker-roll-back/marker.txt');
    await running(server, during.id);
    await server.json(`/v1/environments/${env.id}/versions/1/activate`, { method: 'POST' });
    // The running execution holds the allocation bound to version 2: a command meanwhile reads 2, and says so.
    const meanwhile = await run(server, env.id, 'cat /env/docker-roll-back/marker.txt');
    expect([meanwhile.stdout, meanwhile.record.version, meanwhile.record.target.generation], meanwhile.stderr + JSON.stringify(meanwhile.record)).toEqual(['two', 2, first.record.target.generation]);
    expect(await finished(server, during.id)).toMatchObject({ status: 'exited', exitCode: 0, version: 2 });
    expect(await (await server.call(`/v1/executions/${during.id}/output`)).text()).toBe('two');

    // Idle now: the next execution gets a new allocation, bound to version 1.
    const next = await run(server, env.id, 'cat /env/docker-roll-back/marker.txt');
    expect([next.stdout, next.record.version]).toEqual(['one', 1]);
    expect(next.record.target.generation).toBeGreaterThan(first.record.target.generation);
    expect((await server.json(`/v1/environments/${env.id}/versions`)).latest).toBe(2); // nothing rebuilt
  }, 120_000);

  it('should fail a build whose image lacks the installer, naming it in the log and the error', async () => {
    const env = await createNamed(server, 'Docker No Npm', undefined, docker);
    await putFile(server, env.id, 'package.json', JSON.stringify({ name: 'no-npm', version: '1.0.0' }));
    const record = await build(server, env.id);
    expect(record).toMatchObject({ status: 'failed', error: 'npm install could not start: npm is not installed in the image berth-base:latest' });
    expect(record.log).toContain('$ npm install');
    expect(record.log).toContain('npm is not installed in the image berth-base:latest');
    expect((await server.json(`/v1/environments/${env.id}`)).status).toBe('failed');
  }, 60_000);

  it('should not let a build read another environment, Berth\'s data directory or the host', async () => {
    const other = await createNamed(server, 'Docker Other Secrets');
    await putFile(server, other.id, 'secret.txt', 'the-other-secret');
    const secret = path.join(server.dataDir, 'environments', other.id, 'source', 'secret.txt');
    const env = await createNamed(server, 'Docker Curious Build', undefined, docker);
    await putFile(
      server,
      env.id,
      'setup.sh',
      `cat ${secret} || echo "no secret here"\ncat ${server.dataDir}/token || echo "no token here"\nls /env\ncat /etc/hostname\n`,
    );
    const record = await build(server, env.id);
    expect(record.status, record.log).toBe('ready');
    expect(record.log).not.toContain('the-other-secret');
    expect(record.log).toContain('no secret here');
    expect(record.log).toContain('no token here');
    expect(record.log).toMatch(/^docker-curious-build$/m); // /env holds its own version only
    expect(record.log).toMatch(/^berth-build$/m);
  }, 60_000);

  it('should run a build in a locked-down container and remove it when an interrupted build is recovered', async () => {
    const env = await createNamed(server, 'Docker Interrupted', undefined, { ...docker, network: 'none', memoryMb: 256 });
    await putFile(server, env.id, 'setup.sh', 'echo started; sleep 60\n');
    const started = await server.json(`/v1/environments/${env.id}/build`, { method: 'POST' });
    await logShows(env.id, started.version, 'started');
    const [box] = await containersOf(LABEL.buildId, `${env.id}-${started.version}`);
    const info = await rawDocker.getContainer(box.Id).inspect();
    expect(info.Config.User).toBe('1000:1000');
    expect(info.HostConfig).toMatchObject({ ReadonlyRootfs: true, CapDrop: ['ALL'], NetworkMode: 'none', Memory: 256 * 1024 * 1024 });
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges');
    // Nothing of the host but the version being built, writable at the path executions will see.
    expect(info.Mounts.map((m) => [m.Type, m.Source, m.Destination, m.RW])).toEqual([['bind', versionDir(env.id, started.version), '/env/docker-interrupted', true]]);

    await server.restart('SIGKILL');
    const record = await waitBuild(server, env.id, started.version);
    expect(record).toMatchObject({ status: 'failed', error: 'interrupted by a runtime restart' });
    await waitFor(() => containersOf(LABEL.buildId, `${env.id}-${started.version}`), {
      until: (left) => left.length === 0,
      timeoutMs: 20_000,
      intervalMs: 100,
      what: "the interrupted build's container to be removed",
    });
  }, 120_000);
});
