/**
 * supervisor.sh is plain POSIX sh: it runs, claims, cancels and times out in a container-like root that holds
 * nothing but a static busybox (read-only, uid 1000, PATH=/bin), the way the Docker provider runs it, and the host
 * reads what it wrote with spool.ts. Needs bwrap (to build that root) and busybox; each absence is a visible skip.
 */
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Spool, SUPERVISOR_CLAIM_LOST, SUPERVISOR_PATH } from '../../src/providers/spool.ts';
import { bwrapOrSkip } from './native-harness.ts';

const APPLETS = ['sh', 'setsid', 'sleep', 'mkfifo', 'cat', 'env', 'echo', 'true'];
const busybox = ['/bin/busybox', '/usr/bin/busybox'].find((p) => existsSync(p));
const bwrap = bwrapOrSkip();
if (bwrap && !busybox) console.warn('SKIPPED: busybox is not installed; the busybox supervisor spec does not run (apt-get install -y busybox-static)');

describe.skipIf(!bwrap || !busybox)('supervisor.sh under busybox sh', () => {
  let base: string;
  let root: string;
  let spoolDir: string;
  let spool: Spool;
  let n = 0;

  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'berth-busybox-'));
    root = join(base, 'root');
    spoolDir = join(base, 'spool');
    for (const dir of ['bin', 'berth', 'dev', 'proc', 'tmp', 'spool']) mkdirSync(join(root, dir), { recursive: true });
    copyFileSync(busybox!, join(root, 'bin', 'busybox'));
    chmodSync(join(root, 'bin', 'busybox'), 0o755);
    for (const applet of APPLETS) symlinkSync('busybox', join(root, 'bin', applet));
    copyFileSync(SUPERVISOR_PATH, join(root, 'berth', 'supervisor.sh'));
    mkdirSync(spoolDir, { mode: 0o777 });
    chmodSync(spoolDir, 0o777);
    spool = new Spool(spoolDir);
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  /** `sh /berth/supervisor.sh ARGS` inside the busybox root as uid 1000; resolves with its exit status. */
  const inBox = (args: string[], env: Record<string, string> = { PATH: '/bin' }): Promise<number | null> => {
    const setenv = Object.entries(env).flatMap(([k, v]) => ['--setenv', k, v]);
    const box = [
      ...['--ro-bind', root, '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--bind', spoolDir, '/spool'],
      ...['--unshare-user', '--uid', '1000', '--gid', '1000', '--clearenv', ...setenv],
    ];
    const child = spawn(bwrap!, [...box, '/bin/sh', '/berth/supervisor.sh', ...args], { stdio: 'ignore' });
    return new Promise((resolve) => child.once('exit', resolve));
  };

  const newOp = (): string => {
    const id = `bb-${++n}`;
    mkdirSync(join(spoolDir, id), { mode: 0o777 });
    chmodSync(join(spoolDir, id), 0o777);
    return id;
  };

  it('runs the command with exactly the given environment and writes a receipt the host reads', async () => {
    const id = newOp();
    const status = await inBox(['run', `/spool/${id}`, '--', 'sh', '-c', 'echo out; echo err >&2; env; exit 3'], { PATH: '/bin', GREETING: 'hi' });
    expect(status).toBe(0);
    const state = await spool.readState(id);
    expect(state.claim).toMatchObject({ kind: 'supervisor' });
    expect(state.started?.pgid).toBe(state.started?.pid);
    expect(state.receipt).toMatchObject({ status: 3, cancelled: false, timedOut: false });
    const out = (await spool.read(id, 'stdout', 0)).data.toString();
    expect(out.startsWith('out\n')).toBe(true);
    // busybox ash exports SHLVL itself; nothing else is added.
    expect(out.split('\n').slice(1).filter(Boolean).sort()).toEqual(['GREETING=hi', 'PATH=/bin', 'PWD=/', 'SHLVL=2']);
    expect((await spool.read(id, 'stderr', 0)).data.toString()).toBe('err\n');
  });

  it('refuses a second run of a claimed operation without touching it', async () => {
    const id = newOp();
    expect(await inBox(['run', `/spool/${id}`, '--', 'true'])).toBe(0);
    expect(await inBox(['run', `/spool/${id}`, '--', 'sh', '-c', 'echo again'])).toBe(SUPERVISOR_CLAIM_LOST);
    expect((await spool.read(id, 'stdout', 0)).data.length).toBe(0);
  });

  it('times out a tree that ignores SIGTERM: TERM, then KILL after the grace period', async () => {
    const id = newOp();
    const started = Date.now();
    await inBox(['run', `/spool/${id}`, '-t', '300', '-g', '300', '--', 'sh', '-c', "trap '' TERM; sleep 1000 & sleep 1000; wait"]);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect((await spool.readState(id)).receipt).toMatchObject({ status: 137, timedOut: true, cancelled: false });
  });

  it('cancels from a second supervisor invocation', async () => {
    const id = newOp();
    const running = inBox(['run', `/spool/${id}`, '--', 'sh', '-c', 'sleep 1000 & sleep 1000; wait']);
    await spool.waitUntil(id, async () => spool.readStarted(id), 10_000);
    expect(await inBox(['cancel', `/spool/${id}`, '-g', '300'])).toBe(0);
    expect(await running).toBe(0);
    expect((await spool.readState(id)).receipt).toMatchObject({ status: 143, cancelled: true });
  });

  it('feeds stdin from the FIFO until every writer has closed it', async () => {
    const id = newOp();
    const running = inBox(['run', `/spool/${id}`, '-i', '--', 'cat']);
    await spool.waitUntil(id, async () => spool.readStarted(id), 10_000);
    writeFileSync(spool.file(id, 'stdin'), 'through the fifo\n');
    expect(await running).toBe(0);
    expect((await spool.read(id, 'stdout', 0)).data.toString()).toBe('through the fifo\n');
  });

  it('reports a missing working directory without running anything', async () => {
    const id = newOp();
    await inBox(['run', `/spool/${id}`, '-C', '/nowhere', '--', 'sh', '-c', 'echo ran']);
    expect((await spool.readState(id)).receipt).toMatchObject({ status: null, error: 'cwd' });
    expect((await spool.read(id, 'stdout', 0)).data.length).toBe(0);
  });
});
