/**
 * A build's one-off container on a real engine (build-container.ts): steps stream both outputs and their exit code,
 * run as UID 1000 in the bound directory; a program the image lacks never runs and is named; a step past its timeout
 * removes the container; removal by the build's label leaves nothing, network included.
 */
import { randomUUID } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BuildContainer, BuildStep } from '../../src/providers/docker/build-container.ts';
import { DockerProvider } from '../../src/providers/docker/docker-provider.ts';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { dockerAvailable, dockerEndpoint, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';

const run = newTestRun();
const provider = new DockerProvider({ endpoint: dockerEndpoint, extraLabels: run });
let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-build-container-'));
  chmodSync(dir, 0o777); // written by UID 1000 in the container (the build toolchain hands it over; not here)
});
afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  if (dockerAvailable) await removeTestResources(run);
});

const start = (buildId = `henv_${randomUUID().replace(/-/g, '')}-1`) =>
  provider.startBuildContainer({ buildId, environmentId: 'henv_test', profile: { provider: 'docker' }, binds: [{ source: dir, target: '/env/project' }] });

async function step(box: BuildContainer, argv: string[], timeoutMs?: number) {
  const out: Record<string, string> = { stdout: '', stderr: '' };
  const onOutput: BuildStep['onOutput'] = (stream, chunk) => (out[stream] += chunk.toString('utf8'));
  const exit = await box.run({ argv, cwd: '/env/project', env: { PATH: box.path }, onOutput, ...(timeoutMs ? { timeoutMs } : {}) });
  return { ...exit, ...out };
}

const labelled = async (buildId: string) => {
  const filters = { label: [`${LABEL.buildId}=${buildId}`] };
  return (await rawDocker.listContainers({ all: true, filters })).length + (await rawDocker.listNetworks({ filters })).length;
};

describe.skipIf(!dockerAvailable)('a build container on a real engine', () => {
  it('should run steps as UID 1000 in the bound directory, streaming both outputs and the exit code', async () => {
    const buildId = `henv_${randomUUID().replace(/-/g, '')}-1`;
    const box = await start(buildId);
    expect(box.image).toBe('berth-base:latest');
    expect(await labelled(buildId)).toBe(2); // the container and its own network
    const ran = await step(box, ['sh', '-c', 'echo out; echo err >&2; id -u > who.txt; pwd; exit 7']);
    expect(ran).toMatchObject({ exitCode: 7, stdout: 'out\n/env/project\n', stderr: 'err\n' });
    expect(readFileSync(join(dir, 'who.txt'), 'utf8')).toBe('1000\n');

    const missing = await step(box, ['npm', 'install']);
    expect(missing).toMatchObject({ exitCode: null, error: 'npm is not installed in the image berth-base:latest', stdout: '' });

    await box.remove();
    expect(await labelled(buildId)).toBe(0);
    expect(await step(box, ['true'])).toMatchObject({ exitCode: null, error: 'the build container is gone' });
  });

  it('should remove the container when a step outlives its timeout', async () => {
    const buildId = `henv_${randomUUID().replace(/-/g, '')}-2`;
    const box = await start(buildId);
    const t0 = Date.now();
    const slow = await step(box, ['sleep', '30'], 1_000);
    expect(slow).toMatchObject({ exitCode: null, timedOut: true });
    expect(Date.now() - t0).toBeLessThan(15_000);
    await box.remove();
    expect(await labelled(buildId)).toBe(0);
  });

  it('should say the image is missing rather than pull it', async () => {
    await expect(
      provider.startBuildContainer({ buildId: 'henv_x-1', environmentId: 'henv_x', profile: { provider: 'docker', image: 'no-such-image:1' }, binds: [] }),
    ).rejects.toMatchObject({ code: 'environment_invalid' });
  });
});
