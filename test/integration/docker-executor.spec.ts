/** The Docker executor: the spool/receipt protocol inside a real container (DESIGN §6, §7). */
import { spawn, spawnSync } from 'node:child_process';
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPOOL_PATH } from '../../src/providers/docker/container-spec.ts';
import type { DockerExecutor } from '../../src/providers/docker/docker-executor.ts';
import { DockerProvider } from '../../src/providers/docker/docker-provider.ts';
import type { AllocationRef, ExecSpec, Executor, Receipt } from '../../src/providers/provider.ts';
import { allocatedRef, dockerAvailable, dockerEndpoint, execIn, newAllocationIntent, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';

const run = newTestRun();
const env = { PATH: '/usr/bin:/bin', HOME: '/home/user' };

const spec = (command: string[], more: Partial<ExecSpec> = {}): ExecSpec => ({
  operationId: `op_${randomUUID()}`,
  command,
  env,
  stdin: false,
  ...more,
});

async function untilExited(ex: Executor, operationId: string, timeoutMs = 15_000): Promise<Receipt> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const receipt = await ex.status(operationId);
    if (receipt.state === 'exited') return receipt;
    if (Date.now() > deadline) throw new Error(`not exited: ${JSON.stringify(receipt)}`);
    await ex.waitForChange(operationId, 250);
  }
}

async function output(ex: Executor, operationId: string, stream: 'stdout' | 'stderr' | 'pty'): Promise<string> {
  const chunks: Buffer[] = [];
  for (let cursor = 0; ; ) {
    const chunk = await ex.read(operationId, stream, cursor);
    chunks.push(chunk.data);
    cursor = chunk.next;
    if (chunk.closed) return Buffer.concat(chunks).toString('utf8');
    if (chunk.data.length === 0) await ex.waitForChange(operationId, 250);
  }
}

// Both ways of reaching the spool: the volume's mountpoint from this host (root), and exec in the container (what a
// remote engine gets).
describe.skipIf(!dockerAvailable).each(['auto', 'exec'] as const)('DockerExecutor on a real container (spool access: %s)', (spoolAccess) => {
  const provider = new DockerProvider({ endpoint: dockerEndpoint, extraLabels: run, spoolAccess });
  let ref: AllocationRef;
  let executor: Executor;

  beforeAll(async () => {
    const intent = newAllocationIntent();
    ref = await allocatedRef(provider, intent);
    executor = provider.executor(ref, intent.profile);
  });

  it('should reach the spool the way it was asked to', async () => {
    const via = await (executor as DockerExecutor).spoolVia();
    expect(via).toBe(spoolAccess === 'exec' || process.getuid?.() !== 0 ? 'exec' : 'host');
  });

  it('should mark the ops directory it reaches from the host as a top of directory hierarchies (ext4)', async (ctx) => {
    if ((await (executor as DockerExecutor).spoolVia()) !== 'host') ctx.skip('the spool is reached through exec here');
    const s = spec(['true']);
    await executor.submit(s);
    await untilExited(executor, s.operationId);
    const { Mounts } = await rawDocker.getContainer(ref.identity!.resourceId).inspect();
    const ops = join(Mounts.find((m) => m.Destination === SPOOL_PATH)!.Source, 'ops');
    if (statfsSync(ops).type !== 0xef53) ctx.skip('the engine keeps its volumes off ext4');
    // One directory per command there: spread over the block groups (spread-dirs.ts).
    expect(spawnSync('lsattr', ['-d', ops], { encoding: 'utf8' }).stdout.split(' ')[0]).toContain('T');
  });

  afterAll(async () => {
    if (ref) await provider.deallocate(ref);
    await removeTestResources(run);
  });

  it('should report the exit code and keep stdout and stderr apart', async () => {
    const s = spec(['/bin/sh', '-c', 'echo out; echo err >&2; id -u >&2; exit 7']);
    await executor.submit(s);
    const receipt = await untilExited(executor, s.operationId);
    expect(receipt).toMatchObject({ state: 'exited', exitCode: 7, signal: null, cancelled: false });
    expect(await output(executor, s.operationId, 'stdout')).toBe('out\n');
    expect(await output(executor, s.operationId, 'stderr')).toBe('err\n1000\n');
  });

  it('should never run an operation twice when it is submitted again', async () => {
    const marker = `/tmp/count-${randomUUID()}`;
    const s = spec(['/bin/sh', '-c', `echo run >> ${marker}`]);
    await executor.submit(s);
    await untilExited(executor, s.operationId);
    expect((await executor.submit(s)).state).toBe('exited');
    const count = await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', `wc -l < ${marker}`]);
    expect(count.output.trim()).toBe('1');
  });

  it('should run an operation once when two submits of it race', async () => {
    const marker = `/tmp/race-${randomUUID()}`;
    const s = spec(['/bin/sh', '-c', `echo run >> ${marker}`]);
    await Promise.all([executor.submit(s), executor.submit(s), executor.submit(s)]);
    await untilExited(executor, s.operationId);
    const count = await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', `wc -l < ${marker}`]);
    expect(count.output.trim()).toBe('1');
  });

  it('should start a command in the spare exec made ahead of it, with the environment an exec of its own gives', async () => {
    const word = `it's "odd" \\ $HOME \`x\`\nsecond line`;
    const launcherOf = async (operationId: string) => {
      const id = await execIn(ref.identity!.resourceId, ['/bin/cat', `/berth/spool/ops/${operationId}/docker-exec`]);
      return (await rawDocker.getExec(id.output.trim()).inspect()).ProcessConfig.arguments;
    };
    await (executor as DockerExecutor).settled();
    const viaSpare = spec(['env'], { env: { ...env, WORD: word } });
    await executor.submit(viaSpare);
    await untilExited(executor, viaSpare.operationId);
    // A name no shell can export goes through an exec of its own, with the variables as the exec's Env.
    const ownExec = spec(['env'], { env: { ...env, WORD: word, 'ODD-NAME': 'x' } });
    await executor.submit(ownExec);
    await untilExited(executor, ownExec.operationId);

    expect(await launcherOf(viaSpare.operationId)).toEqual(['-s']);
    expect(await launcherOf(ownExec.operationId)).toContain('run');
    const lines = async (s: ExecSpec) => (await output(executor, s.operationId, 'stdout')).split('\n').filter((l) => l !== 'ODD-NAME=x').sort();
    const spareEnv = await lines(viaSpare);
    expect(spareEnv.join('\n')).toContain(`WORD=${word}`);
    expect(spareEnv).toEqual(await lines(ownExec));
  });

  it('should end its waiting spare shell when closed, and start none after', async () => {
    const shells = async () => (await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', 'ps -o args'])).output.split('\n').filter((l) => l.trim() === '/bin/sh -s').length;
    // The suite's own executor may still be starting its next spare after the tests before: counted once it is up.
    await (executor as DockerExecutor).settled();
    const before = await shells();
    const other = new DockerProvider({ endpoint: dockerEndpoint, extraLabels: run, spoolAccess });
    const ex = other.executor(ref, { provider: 'docker' }) as DockerExecutor;
    await ex.settled();
    expect(await shells()).toBe(before + 1);
    await other.close();
    for (let i = 0; i < 100 && (await shells()) > before; i++) await new Promise((r) => setTimeout(r, 50));
    expect(await shells()).toBe(before);
    // A closed executor still runs commands, each in an exec of its own.
    const s = spec(['true']);
    await ex.submit(s);
    expect(await untilExited(ex, s.operationId)).toMatchObject({ exitCode: 0 });
    await ex.settled();
    expect(await shells()).toBe(before);
  });

  it('should feed stdin to the command and close it on end', async () => {
    const s = spec(['cat'], { stdin: true });
    expect((await executor.submit(s)).state).toBe('running');
    await executor.writeStdin(s.operationId, Buffer.from('hello '));
    await executor.writeStdin(s.operationId, Buffer.from('through the fifo\n'));
    await executor.endStdin(s.operationId);
    expect(await untilExited(executor, s.operationId)).toMatchObject({ exitCode: 0 });
    expect(await output(executor, s.operationId, 'stdout')).toBe('hello through the fifo\n');
  });

  it('should run a command on a terminal of the requested size and follow resizes', async () => {
    const s = spec(['/bin/sh', '-c', 'stty size; read line; echo "got $line"; stty size'], { stdin: true, pty: { cols: 100, rows: 30 } });
    expect((await executor.submit(s)).state).toBe('running');
    // Resized once the command looked at its first size (an earlier resize may land before it looks).
    for (let i = 0; i < 200 && !(await executor.read(s.operationId, 'pty', 0)).data.includes('30 100'); i++) await new Promise((r) => setTimeout(r, 25));
    await executor.resize(s.operationId, 132, 43);
    await executor.writeStdin(s.operationId, Buffer.from('abc\n'));
    expect(await untilExited(executor, s.operationId)).toMatchObject({ exitCode: 0 });
    const text = await output(executor, s.operationId, 'pty');
    expect(text).toMatch(/^30 100\r\n/);
    expect(text).toContain('got abc\r\n');
    expect(text).toMatch(/43 132\r\n$/);
  });

  it('should cancel the whole process tree and leave no process behind', async () => {
    const s = spec(['/bin/sh', '-c', 'sleep 1000 & sleep 1000; wait']);
    expect((await executor.submit(s)).state).toBe('running');
    const receipt = await executor.cancel(s.operationId);
    expect(receipt).toMatchObject({ state: 'exited', cancelled: true });
    expect(receipt.signal ?? receipt.exitCode).toBeTruthy();
    const ps = await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', 'ps -o pid,args']);
    expect(ps.output).not.toContain('sleep 1000');
  });

  it('should cancel a command on a terminal', async () => {
    const s = spec(['/bin/sh', '-c', 'sleep 1000 & sleep 1000; wait'], { pty: { cols: 80, rows: 24 } });
    expect((await executor.submit(s)).state).toBe('running');
    expect(await executor.cancel(s.operationId)).toMatchObject({ state: 'exited', cancelled: true });
    const ps = await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', 'ps -o pid,args']);
    expect(ps.output).not.toContain('sleep 1000');
  });

  it('should stop a terminal command at its timeout', async () => {
    const s = spec(['sleep', '30'], { pty: { cols: 80, rows: 24 }, timeoutMs: 300 });
    await executor.submit(s);
    expect(await untilExited(executor, s.operationId)).toMatchObject({ state: 'exited', timedOut: true });
  });

  it('should stop a command at its timeout', async () => {
    const s = spec(['sleep', '30'], { timeoutMs: 300 });
    await executor.submit(s);
    expect(await untilExited(executor, s.operationId)).toMatchObject({ state: 'exited', timedOut: true, signal: 'SIGTERM' });
  });

  it('should say why a command never started', async () => {
    const s = spec(['true'], { cwd: '/no/such/dir' });
    await executor.submit(s);
    expect(await untilExited(executor, s.operationId)).toMatchObject({ exitCode: null, error: 'cwd' });
  });

  it('should fence an abandoned operation so a late submit never starts it', async () => {
    const operationId = `op_${randomUUID()}`;
    expect((await executor.abandon(operationId)).state).toBe('absent');
    expect((await executor.submit({ ...spec(['true']), operationId })).state).toBe('absent');
  });

  it('should keep output and status when the runtime that submitted is SIGKILLed', async () => {
    const s = spec(['/bin/sh', '-c', 'echo before; sleep 1; echo after; exit 3']);
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', fileURLToPath(new URL('./fixtures/docker-submit-then-hang.ts', import.meta.url)), JSON.stringify({ ref, spec: s }), JSON.stringify(dockerEndpoint), spoolAccess],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const said = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => resolve(d.toString()));
      child.on('exit', (code) => reject(new Error(`child exited ${code}`)));
    });
    expect(said).toContain('submitted running');
    child.kill('SIGKILL');

    // A fresh provider: nothing in memory about the operation.
    const fresh = new DockerProvider({ endpoint: dockerEndpoint, spoolAccess }).executor(ref, { provider: 'docker' });
    expect(await untilExited(fresh, s.operationId)).toMatchObject({ exitCode: 3 });
    expect(await output(fresh, s.operationId, 'stdout')).toBe('before\nafter\n');
  });

  it('should release an operation\'s spool', async () => {
    const s = spec(['echo', 'bye']);
    await executor.submit(s);
    await untilExited(executor, s.operationId);
    await executor.release(s.operationId);
    expect((await executor.status(s.operationId)).state).toBe('absent');
  });

  it('should report a supervisor killed with its container as absent, never running', async () => {
    const intent = newAllocationIntent();
    const other = await allocatedRef(provider, intent);
    try {
      const ex = provider.executor(other, intent.profile);
      const s = spec(['sleep', '1000']);
      expect((await ex.submit(s)).state).toBe('running');
      await rawDocker.getContainer(other.identity!.resourceId).restart({ t: 0 });
      expect((await ex.status(s.operationId)).state).toBe('absent');
    } finally {
      await provider.deallocate(other);
    }
  });
});
