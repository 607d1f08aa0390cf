/**
 * The native executor against real processes: exit status, byte-exact output, idempotent submit, the abandon
 * fence, cancellation of a whole process tree, timeouts, stdin, the filtered environment and release.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { commandEnv } from '../../src/providers/command-env.ts';
import { NativeExecutor } from '../../src/providers/native/native-executor.ts';
import type { Receipt } from '../../src/providers/provider.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { collect, isLive, launcherPid, liveProcessesWith, nativeFixture, run, spec, untilExited, type Fixture } from './native-harness.ts';

let fx: Fixture;
beforeEach(() => {
  fx = nativeFixture();
});
afterEach(() => fx.cleanup());

describe('native executor', () => {
  it('reports the exit code and keeps stdout and stderr apart, byte for byte', async () => {
    const binary = Buffer.from([0, 1, 2, 0xff, 0xfe, 0x0a, 0x0d, 0x80, 0x00]);
    const file = join(fx.root, 'bytes.bin');
    writeFileSync(file, binary);
    const { receipt, stdout, stderr } = await run(fx.executor, spec(['/bin/sh', '-c', `cat ${file}; printf 'oops\\n' >&2; exit 3`]));
    expect(receipt).toMatchObject({ state: 'exited', exitCode: 3, signal: null, cancelled: false, timedOut: false });
    expect(stdout.equals(binary)).toBe(true);
    expect(stderr.toString()).toBe('oops\n');
    expect(receipt.sizes).toEqual({ stdout: binary.length, stderr: 5, pty: 0 });
    expect(Date.parse(receipt.exitedAt!)).toBeGreaterThanOrEqual(Date.parse(receipt.startedAt!));
  });

  it('runs an operation once however often it is submitted', async () => {
    const counter = join(fx.root, 'count');
    const s = spec(['/bin/sh', '-c', `echo run >> ${counter}`]);
    const racing = await Promise.all([fx.executor.submit(s), fx.executor.submit(s), fx.executor.submit(s)]);
    await untilExited(fx.executor, s.operationId);
    const other = new NativeExecutor({ spoolDir: fx.spoolDir, profile: { provider: 'native' } });
    expect(await other.submit(s)).toMatchObject({ state: 'exited', exitCode: 0 });
    expect(await fx.executor.submit(s)).toMatchObject({ state: 'exited', exitCode: 0 });
    expect(readFileSync(counter, 'utf8')).toBe('run\n');
    expect(racing.every((r) => r.operationId === s.operationId && r.state !== 'absent')).toBe(true);
  });

  it('never runs an operation that recovery abandoned first', async () => {
    const marker = join(fx.root, 'ran');
    const s = spec(['/bin/sh', '-c', `touch ${marker}`]);
    expect(await fx.executor.abandon(s.operationId)).toMatchObject({ state: 'absent' });
    const refused = await fx.executor.submit(s).catch((e: unknown) => e);
    expect(isBerthError(refused, 'invalid_state')).toBe(true);
    expect(await fx.executor.status(s.operationId)).toMatchObject({ state: 'absent' });
    expect(existsSync(marker)).toBe(false);
  });

  it('abandon of a finished operation returns its receipt', async () => {
    const s = spec(['true']);
    await run(fx.executor, s);
    expect(await fx.executor.abandon(s.operationId)).toMatchObject({ state: 'exited', exitCode: 0 });
  });

  it('cancel stops the whole process tree and the receipt says cancelled', async () => {
    const tag = `berth-tree-${process.pid}-${Date.now()}`;
    // `exec -a` is not POSIX: tag the tree through an argument every member carries instead.
    const s = spec(['/bin/sh', '-c', `sleep 1000 & sleep 1000; wait`, tag]);
    expect(await fx.executor.submit(s)).toMatchObject({ state: 'running' });
    const { pid } = await fx.executor.status(s.operationId);
    await waitFor(() => descendants(pid!).length >= 2, { timeoutMs: 5_000, what: 'the shell and its two sleeps' });
    const tree = [pid!, ...descendants(pid!)];
    const receipt = await fx.executor.cancel(s.operationId);
    expect(receipt).toMatchObject({ state: 'exited', cancelled: true, signal: 'SIGTERM' });
    expect(tree.filter(isLive)).toEqual([]);
    expect(liveProcessesWith(tag)).toEqual([]);
  });

  it('cancel right after submit stops a command that may not have made its process group yet', async () => {
    for (let i = 0; i < 15; i++) {
      const s = spec(['sleep', '1000']);
      const { pid } = await fx.executor.submit(s);
      expect(await fx.executor.cancel(s.operationId)).toMatchObject({ state: 'exited', cancelled: true });
      expect(isLive(pid!)).toBe(false);
    }
  });

  it('cancel escalates to SIGKILL when the tree ignores SIGTERM', async () => {
    const s = spec(['/bin/sh', '-c', `trap '' TERM; sleep 1000 & sleep 1000; wait`]);
    await fx.executor.submit(s);
    const { pid } = await fx.executor.status(s.operationId);
    await waitFor(() => descendants(pid!).length >= 2, { timeoutMs: 5_000, what: 'the shell and its two sleeps' });
    const tree = [pid!, ...descendants(pid!)];
    const receipt = await fx.executor.cancel(s.operationId);
    expect(receipt).toMatchObject({ state: 'exited', cancelled: true, signal: 'SIGKILL' });
    expect(tree.filter(isLive)).toEqual([]);
  });

  it('a timeout stops the command the same way and the receipt says timedOut', async () => {
    const started = Date.now();
    const { receipt } = await run(fx.executor, spec(['/bin/sh', '-c', 'sleep 1000 & sleep 1000; wait'], { timeoutMs: 300 }));
    expect(receipt).toMatchObject({ state: 'exited', timedOut: true, cancelled: false, signal: 'SIGTERM' });
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('waits for every process of the group before writing the receipt', async () => {
    const { receipt, stdout } = await run(fx.executor, spec(['/bin/sh', '-c', '(sleep 0.3; echo late) & echo early']));
    expect(receipt.exitCode).toBe(0);
    expect(stdout.toString()).toBe('early\nlate\n');
  });

  it('counts settleMs from the start it saw, not from the submit: a command queued past it is still answered at its exit', async () => {
    await run(fx.executor, spec(['true']));
    // The launcher and what it started (the spare supervisor included) held: the next command waits past settleMs.
    const group = launcherPid()!;
    process.kill(-group, 'SIGSTOP');
    let submitted: Promise<Receipt>;
    try {
      submitted = fx.executor.submit(spec(['sleep', '0.1'], { settleMs: 1_000 }));
      await new Promise((resolve) => setTimeout(resolve, 1_200));
    } finally {
      process.kill(-group, 'SIGCONT');
    }
    expect(await submitted).toMatchObject({ state: 'exited', exitCode: 0 });
  });

  it('round-trips stdin through cat', async () => {
    const s = spec(['cat'], { stdin: true });
    await fx.executor.submit(s);
    const payload = Buffer.concat([Buffer.from('hello\n'), Buffer.alloc(300_000, 0xab), Buffer.from([0, 255])]);
    const reading = collect(fx.executor, s.operationId, 'stdout');
    await fx.executor.writeStdin(s.operationId, payload.subarray(0, 1000));
    await fx.executor.writeStdin(s.operationId, payload.subarray(1000));
    await fx.executor.endStdin(s.operationId);
    expect((await reading).equals(payload)).toBe(true);
    expect(await untilExited(fx.executor, s.operationId)).toMatchObject({ exitCode: 0 });
  });

  it('gives a command with stdin: false an immediate EOF', async () => {
    const { stdout } = await run(fx.executor, spec(['/bin/sh', '-c', 'cat; echo done']));
    expect(stdout.toString()).toBe('done\n');
  });

  it('lets none of the runtime environment leak into the command', async () => {
    const secrets = { BERTH_TOKEN: 'tok-s3cret', BERTH_EVENTSTORE_URL: 'esdb://secret-host', DOCKER_HOST: 'tcp://secret:2376', AWS_SECRET_ACCESS_KEY: 'aws-s3cret' };
    Object.assign(process.env, secrets);
    try {
      const env = commandEnv({ env: { GREETING: 'hi there' } });
      const { stdout } = await run(fx.executor, spec(['env'], { env }));
      const text = stdout.toString();
      for (const [name, value] of Object.entries(secrets)) {
        expect(text).not.toContain(name);
        expect(text).not.toContain(value);
      }
      const names = text.trim().split('\n').map((l) => l.slice(0, l.indexOf('=')));
      expect(names.sort()).toEqual(['GREETING', 'HOME', 'LANG', 'PATH', 'PWD', 'USER'].sort());
      expect(text).toContain('GREETING=hi there\n');
    } finally {
      for (const name of Object.keys(secrets)) delete process.env[name];
    }
  });

  it('runs in the requested directory, and reports a missing one without running anything', async () => {
    const { stdout } = await run(fx.executor, spec(['pwd'], { cwd: fx.root }));
    expect(stdout.toString()).toBe(`${fx.root}\n`);
    const { receipt } = await run(fx.executor, spec(['pwd'], { cwd: join(fx.root, 'missing') }));
    expect(receipt).toMatchObject({ state: 'exited', exitCode: null, error: 'cwd' });
  });

  it('reports a command that cannot be found as exit 127', async () => {
    const { receipt, stderr } = await run(fx.executor, spec(['berth-no-such-command']));
    expect(receipt.exitCode).toBe(127);
    expect(stderr.length).toBeGreaterThan(0);
  });

  it('reads from any cursor, and only up to the final size once exited', async () => {
    const s = spec(['/bin/sh', '-c', 'printf 0123456789']);
    await run(fx.executor, s);
    expect(await fx.executor.read(s.operationId, 'stdout', 4, 3)).toMatchObject({ next: 7, closed: false });
    expect((await fx.executor.read(s.operationId, 'stdout', 7)).data.toString()).toBe('789');
    expect(await fx.executor.read(s.operationId, 'stdout', 10)).toMatchObject({ next: 10, closed: true });
    expect(await fx.executor.read(s.operationId, 'stderr', 0)).toMatchObject({ next: 0, closed: true });
  });

  it('wakes a follower that passes its cursor as soon as bytes pass it, and one that asked status when the receipt lands', async () => {
    const s = spec(['/bin/sh', '-c', 'sleep 0.3; printf hi; sleep 0.3']);
    await fx.executor.submit(s);
    let start = Date.now();
    await fx.executor.waitForChange(s.operationId, 10_000, { stdout: 0 });
    expect(Date.now() - start).toBeLessThan(3000);
    expect((await fx.executor.read(s.operationId, 'stdout', 0)).data.toString()).toBe('hi');
    expect(await fx.executor.status(s.operationId)).toMatchObject({ state: 'running' });
    start = Date.now();
    await fx.executor.waitForChange(s.operationId, 10_000);
    expect(Date.now() - start).toBeLessThan(3000);
    expect(await fx.executor.status(s.operationId)).toMatchObject({ state: 'exited' });
    start = Date.now();
    await fx.executor.waitForChange(s.operationId, 10_000, { stdout: 2 });
    expect(Date.now() - start).toBeLessThan(1000);
  });

  it('refuses to release a running operation and drops the spool of a finished one', async () => {
    const s = spec(['sleep', '1000']);
    await fx.executor.submit(s);
    await expect(fx.executor.release(s.operationId)).rejects.toMatchObject({ code: 'invalid_state' });
    await fx.executor.cancel(s.operationId);
    await fx.executor.release(s.operationId);
    expect(existsSync(join(fx.spoolDir, s.operationId))).toBe(false);
  });

  it('rejects operation ids that are not a plain file name', async () => {
    for (const operationId of ['..', 'a/b', '', 'x'.repeat(129), 'sp ace']) {
      await expect(fx.executor.submit({ ...spec(['true']), operationId })).rejects.toMatchObject({ code: 'invalid_request' });
    }
  });
});

function descendants(pid: number): number[] {
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
  return children.flatMap((c) => [c, ...descendants(c)]);
}
