/**
 * Output and status survive the runtime: an operation submitted by a child process that is SIGKILLed right after
 * submit still completes, and a fresh executor over the same spool reads its receipt and every byte of its output.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { commandEnv } from '../../src/providers/command-env.ts';
import { NativeExecutor } from '../../src/providers/native/native-executor.ts';
import { collect, isLive, nativeFixture, untilExited, type Fixture } from './native-harness.ts';

const child = fileURLToPath(new URL('./fixtures/native-submit-then-hang.ts', import.meta.url));

let fx: Fixture;
beforeEach(() => {
  fx = nativeFixture();
});
afterEach(() => fx.cleanup());

it('keeps running, spooling and writing the receipt after the runtime that submitted it is SIGKILLed', async () => {
  const known = randomBytes(10 * 1024 * 1024);
  const file = join(fx.root, 'known.bin');
  writeFileSync(file, known);
  const operationId = 'crash-survivor';
  const spec = { operationId, command: ['/bin/sh', '-c', `sleep 0.5; cat ${file}; echo done >&2; exit 7`], env: commandEnv(), stdin: false };

  const runtime = spawn(process.execPath, ['--import', 'tsx', child, fx.spoolDir, JSON.stringify(spec)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const submitted = await new Promise<string>((resolve, reject) => {
    let out = '';
    runtime.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(out);
    });
    runtime.once('exit', (code) => reject(new Error(`child exited ${code} before submitting: ${out}`)));
  });
  expect(submitted).toMatch(/^submitted .*"state":"running"/);
  runtime.kill('SIGKILL');
  await new Promise((resolve) => runtime.once('exit', resolve));

  // A new runtime, with nothing in memory about the operation.
  const after = new NativeExecutor({ spoolDir: fx.spoolDir, profile: { provider: 'native' } });
  expect(await after.status(operationId)).toMatchObject({ state: 'running' });
  const receipt = await untilExited(after, operationId);
  expect(receipt).toMatchObject({ state: 'exited', exitCode: 7, cancelled: false, sizes: { stdout: known.length, stderr: 5 } });
  const stdout = await collect(after, operationId, 'stdout');
  expect(stdout.length).toBe(known.length);
  expect(stdout.equals(known)).toBe(true);
  expect((await collect(after, operationId, 'stderr')).toString()).toBe('done\n');
  // Submitting it again after the crash does not run it again.
  expect(await after.submit(spec)).toMatchObject({ state: 'exited', exitCode: 7 });
});

it('reports a supervised operation whose supervisor was killed as absent: its outcome cannot be proven', async () => {
  const s = { operationId: 'lost-supervisor', command: ['sleep', '1000'], env: commandEnv(), stdin: false };
  await fx.executor.submit(s);
  const { pid } = await fx.executor.status(s.operationId);
  const claim = readFileSync(join(fx.spoolDir, s.operationId, 'claim'), 'utf8');
  const supervisor = Number(claim.split(' ')[1]);
  process.kill(supervisor, 'SIGKILL');
  const other = new NativeExecutor({ spoolDir: fx.spoolDir, profile: { provider: 'native' }, graceMs: 200 });
  await expect.poll(async () => (await other.status(s.operationId)).state).toBe('absent');
  expect(await other.abandon(s.operationId)).toMatchObject({ state: 'absent' });
  // Cancel still stops the orphaned command.
  expect(isLive(pid!)).toBe(true);
  await other.cancel(s.operationId);
  expect(isLive(pid!)).toBe(false);
});
