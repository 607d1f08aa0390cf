/**
 * Cold allocation on the Docker engine: DockerProvider.allocate (intent -> ready, including its lookups, spool
 * layout and confirmation) against raw dockerode creating and starting the same network, volumes and container.
 * Needs an engine (scripts/docker-up.sh); without one it prints nothing but a skip line.
 */
import { randomUUID } from 'node:crypto';
import { containerSpec, networkSpec, volumeSpec, workspaceVolumeSpec } from '../src/providers/docker/container-spec.ts';
import { createDockerClient, endpointFromEnv } from '../src/providers/docker/docker-client.ts';
import { DockerProvider } from '../src/providers/docker/docker-provider.ts';
import { allocationLabels, resourceNames } from '../src/providers/docker/labels.ts';
import type { AllocationIntent } from '../src/providers/provider.ts';
import { figure, median } from './figure.ts';
import { newAllocationIntent, removeTestResources } from '../test/integration/docker-env.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 9);
const TARGET = 1.15;
const benchLabel = { 'berth.bench-run': randomUUID() };

const endpoint = endpointFromEnv();
const docker = createDockerClient(endpoint, 30_000);
const provider = new DockerProvider({ endpoint, extraLabels: benchLabel });

async function viaProvider(intent: AllocationIntent): Promise<void> {
  const report = await provider.allocate(intent);
  if (report.status !== 'ready') throw new Error(`allocate: ${JSON.stringify(report)}`);
}

async function raw(intent: AllocationIntent): Promise<void> {
  const names = resourceNames(intent.requestId);
  const labels = allocationLabels(intent, benchLabel);
  await docker.createNetwork(networkSpec(names, labels));
  await docker.createVolume(volumeSpec(names, labels));
  await docker.createVolume(workspaceVolumeSpec(names, labels, intent.profile));
  const container = await docker.createContainer(containerSpec(intent, names, labels));
  await container.start();
}

const cleanup = (): Promise<void> => removeTestResources(benchLabel, docker);

async function timed(fn: (intent: AllocationIntent) => Promise<void>): Promise<number> {
  const intent = newAllocationIntent();
  const start = process.hrtime.bigint();
  await fn(intent);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  await cleanup();
  return ms;
}


if (!(await provider.available())) {
  console.log('skipped: no Docker engine (run scripts/docker-up.sh)');
  process.exit(0);
}

try {
  await timed(raw); // warm the engine's caches once, for both sides
  await timed(viaProvider);
  const providerMs: number[] = [];
  const rawMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    // Alternate the order so drift on the shared machine hits both sides alike.
    if (i % 2 === 0) {
      rawMs.push(await timed(raw));
      providerMs.push(await timed(viaProvider));
    } else {
      providerMs.push(await timed(viaProvider));
      rawMs.push(await timed(raw));
    }
  }
  figure('docker-acquire', median(providerMs), 'ms', median(rawMs), { op: '<=', ratio: TARGET });
} finally {
  await cleanup();
}
