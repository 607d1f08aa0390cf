/**
 * One short command in a Docker allocation: the executor (`sh -c true` submitted through the in-container
 * supervisor until its receipt says exited) against a raw dockerode exec of the same command (create, start
 * attached, wait for the end, inspect the exit code). After each executor sample its spool is released and the
 * spare exec it then starts is waited for, untimed, so that engine work lands in neither side's next sample. Needs
 * an engine (scripts/docker-up.sh) and root (the executor reads the spool from the volume); without them it prints
 * a skip line.
 */
import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { createDockerClient, endpointFromEnv } from '../src/providers/docker/docker-client.ts';
import type { DockerExecutor } from '../src/providers/docker/docker-executor.ts';
import { DockerProvider } from '../src/providers/docker/docker-provider.ts';
import { allocatedRef, newAllocationIntent } from '../test/integration/docker-env.ts';
import { figure, median } from './figure.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 21);
const TARGET = 1.1;
const COMMAND = ['/bin/sh', '-c', 'true'];
const env = { PATH: '/usr/bin:/bin' };

const endpoint = endpointFromEnv();
const docker = createDockerClient(endpoint, 30_000);
const provider = new DockerProvider({ endpoint, extraLabels: { 'berth.bench-run': randomUUID() } });

async function viaExecutor(executor: DockerExecutor, operationId: string): Promise<void> {
  let receipt = await executor.submit({ operationId, command: COMMAND, env, stdin: false });
  while (receipt.state !== 'exited') {
    await executor.waitForChange(operationId, 1_000, {}); // the receipt: a wait for any change could begin after it
    receipt = await executor.status(operationId);
  }
  if (receipt.exitCode !== 0) throw new Error(`executor: ${JSON.stringify(receipt)}`);
}

async function raw(containerId: string): Promise<void> {
  const exec = await docker.getContainer(containerId).exec({
    Cmd: COMMAND,
    User: '1000:1000',
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    AttachStdout: true,
    AttachStderr: true,
  });
  const stream = (await exec.start({ hijack: true, stdin: false })) as Duplex;
  await new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
    stream.resume();
  });
  const { ExitCode } = await exec.inspect();
  if (ExitCode !== 0) throw new Error(`raw exec exited ${ExitCode}`);
}

async function timed(fn: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** One executor sample, then (untimed) what follows it in a runtime: the spool released, the next spare started. */
async function ours(executor: DockerExecutor): Promise<number> {
  const operationId = `op_${randomUUID()}`;
  const ms = await timed(() => viaExecutor(executor, operationId));
  await executor.release(operationId);
  await executor.settled();
  return ms;
}


if (!(await provider.available()) || process.getuid?.() !== 0) {
  console.log('skipped: docker-exec needs a Docker engine (run scripts/docker-up.sh) and root');
  process.exit(0);
}

const intent = newAllocationIntent();
const ref = await allocatedRef(provider, intent);
const executor = provider.executor(ref, intent.profile) as DockerExecutor;
const containerId = ref.identity!.resourceId;

try {
  await timed(() => raw(containerId));
  await ours(executor);
  const executorMs: number[] = [];
  const rawMs: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    // Alternate the order so drift on the shared machine hits both sides alike.
    if (i % 2 === 0) {
      rawMs.push(await timed(() => raw(containerId)));
      executorMs.push(await ours(executor));
    } else {
      executorMs.push(await ours(executor));
      rawMs.push(await timed(() => raw(containerId)));
    }
  }
  figure('docker-exec', median(executorMs), 'ms', median(rawMs), { op: '<=', ratio: TARGET });
} finally {
  await provider.deallocate(ref);
  await provider.close();
}
