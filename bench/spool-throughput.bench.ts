/**
 * Spool throughput: 256 MiB written by a command (`head -c 268435456 /dev/zero`) and read through the native
 * executor's cursor API while it is being written, against the same command read from a raw pipe.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commandEnv } from '../src/providers/command-env.ts';
import { NativeExecutor } from '../src/providers/native/native-executor.ts';

const SIZE = 256 * 1024 * 1024;
const MiB = 1024 * 1024;
const COMMAND = ['head', '-c', String(SIZE), '/dev/zero'];

async function rawPipe(): Promise<number> {
  const start = performance.now();
  const child = spawn(COMMAND[0], COMMAND.slice(1), { stdio: ['ignore', 'pipe', 'ignore'] });
  let bytes = 0;
  for await (const chunk of child.stdout!) bytes += (chunk as Buffer).length;
  if (bytes !== SIZE) throw new Error(`raw pipe read ${bytes} bytes`);
  return SIZE / MiB / ((performance.now() - start) / 1000);
}

async function throughSpool(executor: NativeExecutor, operationId: string): Promise<number> {
  const start = performance.now();
  await executor.submit({ operationId, command: COMMAND, env: commandEnv(), stdin: false });
  let cursor = 0;
  for (;;) {
    const chunk = await executor.read(operationId, 'stdout', cursor, 4 * MiB);
    cursor = chunk.next;
    if (chunk.closed) break;
    if (chunk.data.length === 0) await executor.waitForChange(operationId, 1000);
  }
  if (cursor !== SIZE) throw new Error(`spool read ${cursor} bytes`);
  const rate = SIZE / MiB / ((performance.now() - start) / 1000);
  await executor.release(operationId);
  return rate;
}

const root = mkdtempSync(join(tmpdir(), 'berth-bench-spool-'));
try {
  const executor = new NativeExecutor({ spoolDir: join(root, 'spool'), profile: { provider: 'native' } });
  const raws: number[] = [];
  const spooled: number[] = [];
  // Alternate the two, three times each, and keep the medians: the machine is shared.
  for (let i = 0; i < 3; i++) {
    raws.push(await rawPipe());
    spooled.push(await throughSpool(executor, `throughput-${i}`));
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[1];
  const value = median(spooled);
  const baseline = median(raws);
  const ratio = value / baseline;
  console.log(
    JSON.stringify({ bench: 'spool-throughput-256mib', value: +value.toFixed(1), unit: 'MiB/s', baseline: +baseline.toFixed(1), ratio: +ratio.toFixed(3), target: '>= 0.4', met: ratio >= 0.4 }),
  );
} finally {
  rmSync(root, { recursive: true, force: true });
}
