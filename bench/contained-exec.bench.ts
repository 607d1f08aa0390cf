/**
 * What containment costs: submit -> receipt of `true` (median) through a contained native executor (the sandbox
 * identity's bwrap: user namespace, no capabilities, read-only root, hidden data directory) against the same
 * executor path uncontained, interleaved in one run. Target: contained <= 1.5 x uncontained.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commandEnv } from '../src/providers/command-env.ts';
import { findBubblewrap } from '../src/providers/native/bubblewrap.ts';
import { NativeExecutor } from '../src/providers/native/native-executor.ts';
import { sparesSettled } from '../src/providers/native/supervisor-launcher.ts';
import { figure, median } from './figure.ts';

const ROUNDS = 10;
const PER_ROUND = 20;

if (!findBubblewrap()) {
  console.error('contained-exec: bubblewrap (bwrap) is not installed; no figure');
  process.exit(0);
}

const root = mkdtempSync(join(tmpdir(), 'berth-bench-contained-'));
const uncontained = new NativeExecutor({ spoolDir: join(root, 'spool', 'plain'), profile: { provider: 'native' } });
const contained = new NativeExecutor({ spoolDir: join(root, 'spool', 'contained'), profile: { provider: 'native', contain: true }, hidden: [root] });
const env = commandEnv();
let n = 0;

/** Submit -> receipt as the runtime submits (settleMs); released afterwards, outside the measured time. */
async function timeTrue(executor: NativeExecutor): Promise<number> {
  await sparesSettled();
  const operationId = `bench-${++n}`;
  const start = performance.now();
  let receipt = await executor.submit({ operationId, command: ['true'], env, stdin: false, settleMs: 15 });
  while (receipt.state !== 'exited') {
    await executor.waitForChange(operationId, 1000, {}); // the receipt: a wait for any change could begin after it
    receipt = await executor.status(operationId);
  }
  const elapsed = performance.now() - start;
  if (receipt.exitCode !== 0) throw new Error(`true exited ${receipt.exitCode} (${JSON.stringify(receipt)})`);
  await executor.release(operationId);
  return elapsed;
}

try {
  for (let i = 0; i < 10; i++) {
    await timeTrue(uncontained);
    await timeTrue(contained);
  }
  // Interleaved rounds, so a burst of load on the machine hits both sides alike.
  const plain: number[] = [];
  const sandboxed: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < PER_ROUND; i++) plain.push(await timeTrue(uncontained));
    for (let i = 0; i < PER_ROUND; i++) sandboxed.push(await timeTrue(contained));
  }
  figure('native-contained-true-p50', median(sandboxed), 'ms', median(plain), { op: '<=', ratio: 1.5 });
} finally {
  rmSync(root, { recursive: true, force: true });
}
