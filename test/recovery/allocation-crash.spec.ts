/**
 * kill -9 of a real runtime process at each step of a Docker allocation and of its release (issue 3): after a
 * restart on the same data directory (recovery runs before work is admitted), each case converges with exactly one
 * container for the intent (adopted, the same container) or none, never two, counted on the engine by label.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { dockerAvailable, newTestRun, rawDocker, removeTestResources } from '../integration/docker-env.ts';
import { admin, countLabelled, startTestBerth } from '../integration/environments-berth.ts';

const run = newTestRun();
const child = join(import.meta.dirname, 'fixtures/allocation-crash-child.ts');
const RUNTIME_ID = 'rt_allocation_crash';

let dir: string;
let berth: Berth | undefined;

const start = async () => (berth = await startTestBerth(dir, { docker: { extraLabels: run }, runtimeId: RUNTIME_ID }));
const stop = async () => {
  await berth?.stop();
  berth = undefined;
};

/** Runs the fixture with one crash point; resolves with how it ended. */
function runChild(action: 'acquire' | 'release', environmentId: string, crash: Record<string, string>) {
  const p = spawn(process.execPath, ['--import', 'tsx', child], {
    env: {
      ...process.env,
      ...crash,
      CRASH_DATA_DIR: dir,
      CRASH_ACTION: action,
      CRASH_ENV_ID: environmentId,
      CRASH_LABELS: JSON.stringify(run),
      CRASH_RUNTIME_ID: RUNTIME_ID,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  p.stdout.on('data', (b: Buffer) => (out += b.toString()));
  p.stderr.on('data', (b: Buffer) => (out += b.toString()));
  return new Promise<{ signal: NodeJS.Signals | null; output: string }>((resolve) =>
    p.on('exit', (_code, signal) => resolve({ signal, output: out })),
  );
}

async function createEnvironment(): Promise<string> {
  await start();
  const env = await berth!.api.createEnvironment(admin, { name: 'crash', profile: { provider: 'docker' } });
  return env.id;
}

/** The request ids of every acquisition the environment's stream records. */
async function requestIds(environmentId: string): Promise<string[]> {
  const events = await berth!.runtime.store.readStream(`environment-${environmentId}`);
  return events.filter((e) => e.type === 'environment.acquisition_requested').map((e) => (e.data as { requestId: string }).requestId);
}

const containerIds = async (requestId: string) =>
  (await rawDocker.listContainers({ all: true, filters: { label: [`${LABEL.requestId}=${requestId}`] } })).map((c) => c.Id);

async function crash(action: 'acquire' | 'release', environmentId: string, point: Record<string, string>) {
  await stop();
  const ended = await runChild(action, environmentId, point);
  expect(ended.signal, `the child should have been killed at ${JSON.stringify(point)}:\n${ended.output}`).toBe('SIGKILL');
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-alloc-crash-'));
});
afterEach(async () => {
  await stop();
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => removeTestResources(run));

describe.skipIf(!dockerAvailable)('allocation under kill -9', () => {
  it('(a) after the intent is appended, before the provider call: nothing was created, the intent fails, a new acquire works', async () => {
    const envId = await createEnvironment();
    await crash('acquire', envId, { BERTH_CRASH_AFTER: 'allocation.intended' });
    await start();
    const [requestId] = await requestIds(envId);
    expect(await containerIds(requestId)).toEqual([]);
    // Reconciled before admission: the index holds nothing, the environment is idle again.
    expect((await berth!.api.activeAllocations(admin)).items).toEqual([]);
    expect((await berth!.api.getEnvironment(admin, envId)).state).toBe('idle');

    const a = await berth!.api.acquire(admin, envId);
    expect(a).toMatchObject({ state: 'ready', generation: 2 });
    expect((await countLabelled(LABEL.environmentId, envId)).containers).toBe(1);
  });

  it('(a\') after the acquisition is requested, before the intent: recovery re-sends the same intent, one container', async () => {
    const envId = await createEnvironment();
    await crash('acquire', envId, { BERTH_CRASH_AFTER: 'environment.acquisition_requested' });
    await start();
    const [requestId] = await requestIds(envId);
    const a = await berth!.api.acquire(admin, envId);
    expect(a).toMatchObject({ state: 'ready', generation: 1 });
    expect(await containerIds(requestId)).toEqual([a.identity!.resourceId]);
    expect(await requestIds(envId)).toEqual([requestId]);
  });

  it('(b) after the container is created, before it starts and before any report: the partial allocation is resumed and adopted', async () => {
    const envId = await createEnvironment();
    await crash('acquire', envId, { BERTH_CRASH_AT: 'docker.container-created' });
    await start();
    const [requestId] = await requestIds(envId);
    const [index] = (await berth!.api.activeAllocations(admin)).items;
    expect(index).toMatchObject({ state: 'ready', generation: 1 });
    const created = await containerIds(requestId);
    expect(created).toEqual([index.identity!.resourceId]);
    expect((await rawDocker.getContainer(created[0]).inspect()).State.Running).toBe(true);

    const a = await berth!.api.acquire(admin, envId);
    expect(a.allocationId).toBe(index.allocationId);
    expect(await countLabelled(LABEL.environmentId, envId)).toEqual({ containers: 1, networks: 1, volumes: 2 });
  });

  it('(c) after the container started, before ready is appended: the running container is adopted', async () => {
    const envId = await createEnvironment();
    await crash('acquire', envId, { BERTH_CRASH_AT: 'allocation.provider-answered' });
    const [running] = await rawDocker.listContainers({ filters: { label: [`${LABEL.environmentId}=${envId}`] } });
    expect(running.State).toBe('running');
    await start();
    const [index] = (await berth!.api.activeAllocations(admin)).items;
    expect(index).toMatchObject({ state: 'ready', identity: { resourceId: running.Id } });

    const a = await berth!.api.acquire(admin, envId);
    expect(a.identity?.resourceId).toBe(running.Id);
    const [requestId] = await requestIds(envId);
    expect(await containerIds(requestId)).toEqual([running.Id]);
    expect(await requestIds(envId)).toHaveLength(1);
  });

  it.each([
    ['after the release intent is appended', 'allocation.release_requested'],
    ['while the provider is deallocating', 'environment.allocation_releasing'],
  ])('(d) during release, %s: recovery finishes the release and nothing is left', async (_what, point) => {
    const envId = await createEnvironment();
    const a = await berth!.api.acquire(admin, envId);
    await crash('release', envId, { BERTH_CRASH_AFTER: point });
    await start();
    expect((await berth!.api.activeAllocations(admin)).items).toEqual([]);
    expect((await berth!.api.environments.allocationView(a.allocationId)).state).toBe('released');
    expect((await berth!.api.getEnvironment(admin, envId)).state).toBe('idle');
    expect(await countLabelled(LABEL.allocationId, a.allocationId)).toEqual({ containers: 0, networks: 0, volumes: 0 });
  });
});
