/**
 * Executions end to end through the runtime API (startBerth on a temporary SQLite data directory): submit -> saved of
 * native `true` (p50) against raw execa('true') (p50); Docker `sh -c true` against a raw dockerode exec of the same;
 * 100 concurrent native executions (executions/s) against the same 100 commands started at once with execa; and a
 * 256 MiB stdout followed live by cursor against the same command's stdout read from a raw pipe. Docker figures need
 * an engine (scripts/docker-up.sh) and root.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { execa } from 'execa';
import { createDockerClient, endpointFromEnv } from '../src/providers/docker/docker-client.ts';
import { DockerProvider } from '../src/providers/docker/docker-provider.ts';
import { NativeProvider } from '../src/providers/native/native-provider.ts';
import { sparesSettled } from '../src/providers/native/supervisor-launcher.ts';
import type { Provider } from '../src/providers/provider.ts';
import { startBerth } from '../src/runtime/berth.ts';
import type { Caller, SubmitExecutionInput } from '../src/runtime/runtime-api.ts';

const SEQUENTIAL = Number(process.env.BENCH_RUNS ?? 100);
const DOCKER_RUNS = Number(process.env.BENCH_DOCKER_RUNS ?? 31);
const CONCURRENT = 100;
const CONCURRENT_ROUNDS = Number(process.env.BENCH_CONCURRENT_ROUNDS ?? 5);
const OUTPUT_BYTES = 256 * 1024 * 1024;
const OUTPUT_COMMAND = ['/bin/sh', '-c', `yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c ${OUTPUT_BYTES}`];

const caller: Caller = { scope: 'bench', role: 'admin' };
const root = mkdtempSync(join(tmpdir(), 'berth-bench-e2e-'));
const endpoint = endpointFromEnv();
const dockerProvider = new DockerProvider({ endpoint, extraLabels: { 'berth.bench-run': randomUUID() } });
const withDocker = process.getuid?.() === 0 && (await dockerProvider.available());
const providers: Provider[] = [new NativeProvider({ dataDir: root }), ...(withDocker ? [dockerProvider] : [])];
const berth = await startBerth({ settings: { dataDir: root, store: 'sqlite', maintenanceMs: 600_000 }, runtimeId: 'rt_bench', providers });
const { api } = berth;

const p50 = (samples: number[]): number => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)];
const line = (bench: string, value: number, unit: string, baseline: number, ratio: number, target: string, met: boolean): string =>
  JSON.stringify({ bench, value: +value.toFixed(3), unit, baseline: +baseline.toFixed(3), ratio: +ratio.toFixed(3), target, met });

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await fn();
  return performance.now() - start;
}

/** Submit, then long-poll until the output is saved: what a caller waits for before reading the result. */
async function execute(environment: string, command: string[], more: Partial<SubmitExecutionInput> = {}): Promise<string> {
  const { id } = await api.submitExecution(caller, { operationId: `b-${randomUUID()}`, environment, command, ...more });
  for (;;) {
    const record = await api.getExecution(caller, id, 30_000);
    if (record.step === 'saved' || record.step === 'released' || record.step === 'closing') {
      if (record.status !== 'exited' || record.exitCode !== 0) throw new Error(`bench command failed: ${JSON.stringify(record)}`);
      return id;
    }
  }
}

/**
 * Alternates the two sides so drift on the shared machine hits both alike; answers both sample sets. After each of
 * ours, the runtime finishes what follows `saved` (spool and use released) untimed: left running, that work would
 * land in the next raw sample and flatter the ratio.
 */
async function paired(runs: number, ours: () => Promise<unknown>, raw: () => Promise<unknown>): Promise<[number[], number[]]> {
  const a: number[] = [];
  const b: number[] = [];
  const idle = async () => {
    await berth.runtime.actors.whenIdle();
    // Both executors make their next spare (a native supervisor, a Docker exec) once a command is done: work that
    // must not land in the next raw sample either.
    await sparesSettled();
    if (withDocker) await dockerProvider.settled();
  };
  for (let i = 0; i < runs; i++) {
    if (i % 2 === 0) {
      b.push(await timed(raw));
      a.push(await timed(ours));
      await idle();
    } else {
      a.push(await timed(ours));
      await idle();
      b.push(await timed(raw));
    }
  }
  return [a, b];
}

async function rawDockerExec(containerId: string): Promise<void> {
  const docker = createDockerClient(endpoint, 30_000);
  const exec = await docker.getContainer(containerId).exec({ Cmd: ['/bin/sh', '-c', 'true'], User: '1000:1000', AttachStdout: true, AttachStderr: true });
  const stream = (await exec.start({ hijack: true, stdin: false })) as Duplex;
  await new Promise<void>((resolve, reject) => {
    stream.on('end', resolve).on('close', resolve).on('error', reject).resume();
  });
  if ((await exec.inspect()).ExitCode !== 0) throw new Error('raw exec failed');
}

/**
 * Follows stdout live by cursor while the command runs, until every byte has reached this reader (the artifact
 * copy that follows is not reader throughput; it is waited for after the clock stops). Answers the elapsed ms.
 */
async function followOutput(environment: string): Promise<number> {
  const start = performance.now();
  const { id } = await api.submitExecution(caller, { operationId: `out-${randomUUID()}`, environment, command: OUTPUT_COMMAND });
  let cursor = 0;
  while (cursor < OUTPUT_BYTES) {
    const chunk = await api.readOutput(caller, id, 'stdout', cursor);
    cursor = chunk.next;
    if (chunk.complete && cursor < OUTPUT_BYTES) throw new Error(`stdout ended at ${cursor} bytes`);
    if (chunk.data.length === 0) await api.waitForOutput(caller, id, 1_000);
  }
  const elapsed = performance.now() - start;
  await api.getExecution(caller, id, 60_000);
  return elapsed;
}

async function rawPipe(): Promise<number> {
  const child = execa(OUTPUT_COMMAND[0], OUTPUT_COMMAND.slice(1), { stdout: 'pipe', buffer: false });
  let bytes = 0;
  for await (const chunk of child.stdout!) bytes += (chunk as Buffer).length;
  await child;
  return bytes;
}

try {
  const native = (await api.createEnvironment(caller, { name: 'bench-native', profile: { provider: 'native' } })).id;
  for (let i = 0; i < 5; i++) await Promise.all([execute(native, ['true']), execa('true')]);

  const [ours, raw] = await paired(SEQUENTIAL, () => execute(native, ['true']), () => execa('true'));
  const ratio = p50(ours) / p50(raw);
  console.log(line('execution-e2e-native-true-p50', p50(ours), 'ms', p50(raw), ratio, '<= 2', ratio <= 2));

  // The same 100 commands started at once, each until saved, against the same 100 started at once with execa. A
  // round of each is discarded first (spares, caches, the JIT); then rounds alternate and the medians are compared.
  const concurrentOurs = () => Promise.all(Array.from({ length: CONCURRENT }, () => execute(native, ['true'])));
  const concurrentRaw = () => Promise.all(Array.from({ length: CONCURRENT }, () => execa('true')));
  await paired(1, concurrentOurs, concurrentRaw);
  const [oursBatches, rawBatches] = await paired(CONCURRENT_ROUNDS, concurrentOurs, concurrentRaw);
  const perSecond = CONCURRENT / (p50(oursBatches) / 1000);
  const rawPerSecond = CONCURRENT / (p50(rawBatches) / 1000);
  const concurrentRatio = perSecond / rawPerSecond;
  console.log(line('execution-e2e-native-concurrent-100', perSecond, 'executions/s', rawPerSecond, concurrentRatio, '>= 0.7', concurrentRatio >= 0.7));

  const followMs: number[] = [];
  const pipeMs: number[] = [];
  for (let i = 0; i < 3; i++) {
    followMs.push(await followOutput(native));
    const start = performance.now();
    if ((await rawPipe()) !== OUTPUT_BYTES) throw new Error('the raw pipe lost bytes');
    pipeMs.push(performance.now() - start);
  }
  const mib = OUTPUT_BYTES / 1024 / 1024;
  const throughput = mib / (p50(followMs) / 1000);
  const rawThroughput = mib / (p50(pipeMs) / 1000);
  const outputRatio = throughput / rawThroughput;
  console.log(line('execution-output-256mib-follow', throughput, 'MiB/s', rawThroughput, outputRatio, '>= 0.4', outputRatio >= 0.4));

  if (withDocker) {
    const docker = (await api.createEnvironment(caller, { name: 'bench-docker', profile: { provider: 'docker' } })).id;
    const allocation = await api.acquire(caller, docker);
    const containerId = allocation.identity!.resourceId;
    for (let i = 0; i < 3; i++) await Promise.all([execute(docker, ['/bin/sh', '-c', 'true']), rawDockerExec(containerId)]);
    const [dockerOurs, dockerRaw] = await paired(DOCKER_RUNS, () => execute(docker, ['/bin/sh', '-c', 'true']), () => rawDockerExec(containerId));
    const dockerRatio = p50(dockerOurs) / p50(dockerRaw);
    console.log(line('execution-e2e-docker-sh-true-p50', p50(dockerOurs), 'ms', p50(dockerRaw), dockerRatio, '<= 1.1', dockerRatio <= 1.1));
    await api.release(caller, docker, allocation.allocationId);
  } else {
    console.log('skipped: execution-e2e-docker-sh-true-p50 needs a Docker engine (scripts/docker-up.sh) and root');
  }
} finally {
  await berth.stop();
  rmSync(root, { recursive: true, force: true });
}
