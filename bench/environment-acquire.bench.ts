/**
 * Acquiring an Environment through the runtime API:
 * - cold, on Docker: `acquire` of a fresh environment (intent appended, provider call, report, environment told:
 *   intent -> ready) against raw dockerode creating and starting the same network, volumes and container;
 * - reuse: `acquire` of an environment that is already allocated (p50), against a bare actor `get` (p50).
 * Needs an engine (scripts/docker-up.sh) for the cold figure; without one it prints a skip line for it.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { containerSpec, networkSpec, volumeSpec, workspaceVolumeSpec } from '../src/providers/docker/container-spec.ts';
import { createDockerClient, endpointFromEnv } from '../src/providers/docker/docker-client.ts';
import { DockerProvider } from '../src/providers/docker/docker-provider.ts';
import { allocationLabels, resourceNames } from '../src/providers/docker/labels.ts';
import { NativeProvider } from '../src/providers/native/native-provider.ts';
import type { AllocationIntent } from '../src/providers/provider.ts';
import { startBerth } from '../src/runtime/berth.ts';
import type { Caller } from '../src/runtime/runtime-api.ts';
import { median } from './figure.ts';
import { removeTestResources } from '../test/integration/docker-env.ts';

const COLD_RUNS = Number(process.env.BENCH_RUNS ?? 15);
const REUSE_RUNS = 3000;
const COLD_TARGET = 1.15;
const REUSE_TARGET_MS = 2;
const admin: Caller = { scope: 'default', role: 'admin' };
const benchLabel = { 'berth.bench-run': randomUUID() };

const endpoint = endpointFromEnv();
const docker = createDockerClient(endpoint, 30_000);
const dockerProvider = new DockerProvider({ endpoint, extraLabels: benchLabel });
const dir = mkdtempSync(join(tmpdir(), 'berth-bench-acquire-'));
const berth = await startBerth({
  settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 3_600_000 },
  runtimeId: 'rt_bench_acquire',
  providers: [new NativeProvider({ dataDir: dir }), dockerProvider],
});

const elapsedMs = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;
const round = (x: number, digits = 3) => Number(x.toFixed(digits));

function figure(bench: string, value: number, baseline: number, target: string, met: boolean): string {
  return JSON.stringify({ bench, value: round(value), unit: 'ms', baseline: round(baseline), ratio: round(value / baseline), target, met });
}

/** One cold acquire through the runtime; the release afterwards is not timed. */
async function viaRuntime(): Promise<number> {
  const env = await berth.api.createEnvironment(admin, { name: `cold ${randomUUID()}`, profile: { provider: 'docker' } });
  const start = process.hrtime.bigint();
  const a = await berth.api.acquire(admin, env.id);
  const ms = elapsedMs(start);
  if (a.state !== 'ready') throw new Error(`acquire: ${JSON.stringify(a)}`);
  await berth.api.release(admin, env.id, a.allocationId);
  return ms;
}

/** The same network, volumes and container, created and started with dockerode alone. */
async function raw(): Promise<number> {
  const intent: AllocationIntent = {
    environmentId: `henv_${randomUUID().replace(/-/g, '')}`,
    allocationId: `halloc_${randomUUID()}`,
    requestId: `hreq_${randomUUID()}`,
    generation: 1,
    profile: { provider: 'docker' },
  };
  const names = resourceNames(intent.requestId);
  const labels = allocationLabels(intent, benchLabel);
  const start = process.hrtime.bigint();
  await docker.createNetwork(networkSpec(names, labels));
  await docker.createVolume(volumeSpec(names, labels));
  await docker.createVolume(workspaceVolumeSpec(names, labels, intent.profile));
  const container = await docker.createContainer(containerSpec(intent, names, labels));
  await container.start();
  const ms = elapsedMs(start);
  await cleanup();
  return ms;
}

const cleanup = (): Promise<void> => removeTestResources(benchLabel, docker);

async function cold(): Promise<string> {
  if (!(await dockerProvider.available())) return JSON.stringify({ bench: 'environment-acquire-cold', skipped: 'no Docker engine' });
  await raw(); // warm the engine's caches once, for both sides
  await viaRuntime();
  const runtimeMs: number[] = [];
  const rawMs: number[] = [];
  for (let i = 0; i < COLD_RUNS; i++) {
    // Alternate the order so drift on the shared machine hits both sides alike.
    if (i % 2 === 0) {
      rawMs.push(await raw());
      runtimeMs.push(await viaRuntime());
    } else {
      runtimeMs.push(await viaRuntime());
      rawMs.push(await raw());
    }
  }
  const value = median(runtimeMs);
  const baseline = median(rawMs);
  return figure('environment-acquire-cold', value, baseline, `<= ${COLD_TARGET}`, value / baseline <= COLD_TARGET);
}

async function reuse(): Promise<string> {
  const env = await berth.api.createEnvironment(admin, { name: 'reused host' });
  const { allocationId } = await berth.api.acquire(admin, env.id);
  const acquireMs: number[] = [];
  const getMs: number[] = [];
  for (let i = 0; i < REUSE_RUNS; i++) {
    let start = process.hrtime.bigint();
    const a = await berth.api.acquire(admin, env.id);
    acquireMs.push(elapsedMs(start));
    if (a.allocationId !== allocationId) throw new Error('reuse allocated anew');
    start = process.hrtime.bigint();
    await berth.runtime.actors.get('environment', env.id);
    getMs.push(elapsedMs(start));
  }
  const value = median(acquireMs);
  return figure('environment-acquire-reuse', value, median(getMs), `p50 <= ${REUSE_TARGET_MS} ms`, value <= REUSE_TARGET_MS);
}

try {
  const lines = [await reuse(), await cold()];
  for (const line of lines) console.log(line);
} finally {
  await cleanup().catch(() => undefined);
  await berth.stop();
  rmSync(dir, { recursive: true, force: true });
}
