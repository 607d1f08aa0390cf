/**
 * Native executor overhead: submit -> receipt of `true` (p50) against a raw execa('true') (p50), and the throughput
 * of 100 concurrent executions against 100 concurrent raw execa calls (a ratio, >= 0.7). Each figure ends as one
 * JSON line.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execa } from 'execa';
import { commandEnv } from '../src/providers/command-env.ts';
import { NativeExecutor } from '../src/providers/native/native-executor.ts';
import type { Executor } from '../src/providers/provider.ts';

const SEQUENTIAL = 200;
const CONCURRENT = 100;

const root = mkdtempSync(join(tmpdir(), 'berth-bench-native-'));
const executor = new NativeExecutor({ spoolDir: join(root, 'spool'), profile: { provider: 'native' } });
const env = commandEnv();
let n = 0;

const finished: string[] = [];

/** Submit -> receipt; the spool is released afterwards, outside the measured time. */
async function executeTrue(ex: Executor): Promise<void> {
  const operationId = `bench-${++n}`;
  // As the runtime submits: a command that exits within settleMs is answered by the submit itself.
  let receipt = await ex.submit({ operationId, command: ['true'], env, stdin: false, settleMs: 15 });
  while (receipt.state !== 'exited') {
    await ex.waitForChange(operationId, 1000, {}); // the receipt: a wait for any change could begin after it
    receipt = await ex.status(operationId);
  }
  if (receipt.exitCode !== 0) throw new Error(`true exited ${receipt.exitCode}`);
  finished.push(operationId);
}

async function releaseFinished(): Promise<void> {
  for (const id of finished.splice(0)) await executor.release(id);
}

const p50 = (samples: number[]): number => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)];

async function timeEach(times: number, fn: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i < times; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return samples;
}

async function perSecond(count: number, fn: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await Promise.all(Array.from({ length: count }, fn));
  return count / ((performance.now() - start) / 1000);
}

const line = (bench: string, value: number, unit: string, baseline: number, ratio: number, target: string, met: boolean): string =>
  JSON.stringify({ bench, value: +value.toFixed(3), unit, baseline: +baseline.toFixed(3), ratio: +ratio.toFixed(3), target, met });

try {
  // Warm both paths (module loading, first spawns) before measuring.
  await timeEach(20, () => execa('true'));
  await timeEach(20, () => executeTrue(executor));

  await releaseFinished();
  // Interleaved rounds, so a burst of load on the machine hits both sides alike.
  const rawSamples: number[] = [];
  const nativeSamples: number[] = [];
  for (let round = 0; round < SEQUENTIAL / 20; round++) {
    rawSamples.push(...(await timeEach(20, () => execa('true'))));
    nativeSamples.push(...(await timeEach(20, () => executeTrue(executor))));
    await releaseFinished();
  }
  const raw = p50(rawSamples);
  const native = p50(nativeSamples);
  const rawRate = await perSecond(CONCURRENT, () => execa('true'));
  const nativeRate = await perSecond(CONCURRENT, () => executeTrue(executor));
  await releaseFinished();

  console.log(line('native-exec-true-p50', native, 'ms', raw, native / raw, '<= 2', native / raw <= 2));
  // A ratio to the raw rate of the same run: a fixed rate would measure the machine, not the executor.
  console.log(line('native-exec-concurrent-100', nativeRate, 'executions/s', rawRate, nativeRate / rawRate, '>= 0.7', nativeRate / rawRate >= 0.7));
} finally {
  rmSync(root, { recursive: true, force: true });
}
