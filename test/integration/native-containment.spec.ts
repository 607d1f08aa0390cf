/**
 * Bubblewrap containment is enforced, not described: with `contain: true` the root, the cwd and read-only mounts
 * refuse writes, the private /tmp takes them, Berth's own files are hidden, and `network: 'none'` leaves no
 * route out. Needs bwrap: skipped (with a visible line) when it is missing, a failure under BERTH_REQUIRE_BWRAP=1.
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Profile } from '../../schemas/profile.ts';
import { NativeExecutor } from '../../src/providers/native/native-executor.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { bwrapOrSkip, collect, isLive, nativeFixture, run, spec, type Fixture } from './native-harness.ts';

const bwrap = bwrapOrSkip();

describe.skipIf(!bwrap)('bubblewrap containment', () => {
  let fx: Fixture;
  let workspace: string;
  let version: string;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    // The client exits as soon as it connects: a reset is expected.
    server = createServer((socket) => socket.on('error', () => {}).end('hello from the host\n'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise((resolve) => server.close(resolve)));

  const contained = (profile: Partial<Profile> = {}): void => {
    fx = nativeFixture({ provider: 'native', contain: true, network: 'none', ...profile });
    // A host directory the sandbox shows (the host's /tmp is not: the sandbox has its own), reachable by the
    // sandbox identity, as a version directory must be.
    chmodSync(fx.root, 0o755);
    workspace = mkdtempSync('/var/tmp/berth-cwd-');
    chmodSync(workspace, 0o755);
    version = join(fx.root, 'versions', '1');
    mkdirSync(version, { recursive: true });
    writeFileSync(join(version, 'README'), 'version one\n');
  };
  beforeEach(() => contained());
  afterEach(async () => {
    await fx.cleanup();
    rmSync(workspace, { recursive: true, force: true });
  });

  const sh = (script: string) => spec(['/bin/sh', '-c', script], { cwd: workspace, mounts: [{ source: version, target: '/env/demo' }] });
  const connect = (): string => `${process.execPath} -e "require('net').connect(${port}, '127.0.0.1').on('connect', () => { console.log('connected'); process.exit(0); }).on('error', (e) => { console.log(e.code); process.exit(9); })"`;

  // The cwd is only changed to, never bound writable (it used to be: a cwd anywhere made that place writable).
  it('starts the command in its cwd and lets it write nothing of the host', async () => {
    const stray = `/berth-stray-${process.pid}`;
    const { receipt, stdout, stderr } = await run(
      fx.executor,
      sh(`pwd; echo kept > out.txt || echo cwd-refused; touch ${stray} || echo root-refused; touch /usr/berth-stray || echo usr-refused`),
    );
    expect(receipt.exitCode).toBe(0);
    expect(stdout.toString()).toBe(`${workspace}\ncwd-refused\nroot-refused\nusr-refused\n`);
    expect(stderr.toString()).toMatch(/Read-only file system|Permission denied/);
    expect(existsSync(join(workspace, 'out.txt'))).toBe(false);
    expect(existsSync(stray)).toBe(false);
  });

  it('shows read-only mounts at their target and refuses writes to them', async () => {
    const { stdout } = await run(fx.executor, sh('cat /env/demo/README; echo x > /env/demo/README || echo refused; touch /env/demo/new || echo refused'));
    expect(stdout.toString()).toBe('version one\nrefused\nrefused\n');
    expect(readFileSync(join(version, 'README'), 'utf8')).toBe('version one\n');
    expect(existsSync(join(version, 'new'))).toBe(false);
  });

  it('gives the command a private /tmp', async () => {
    const name = `berth-private-${process.pid}`;
    const { stdout } = await run(fx.executor, sh(`echo inside > /tmp/${name}; cat /tmp/${name}`));
    expect(stdout.toString()).toBe('inside\n');
    expect(existsSync(`/tmp/${name}`)).toBe(false);
  });

  it('hides the Berth data directory (outside /tmp, which is private anyway)', async () => {
    const dataDir = mkdtempSync('/var/tmp/berth-data-');
    try {
      // Readable by the sandbox identity, so that only the hiding keeps it out.
      chmodSync(dataDir, 0o755);
      writeFileSync(join(dataDir, 'token'), 'tok-s3cret', { mode: 0o644 });
      const read = spec(['/bin/sh', '-c', `cat ${dataDir}/token || echo hidden`]);
      const hiding = new NativeExecutor({ spoolDir: join(dataDir, 'spool', 'a'), profile: { provider: 'native', contain: true }, hidden: [dataDir] });
      expect((await run(hiding, read)).stdout.toString()).toBe('hidden\n');
      const control = new NativeExecutor({ spoolDir: join(fx.root, 'spool', 'control'), profile: { provider: 'native', contain: true } });
      expect((await run(control, { ...read, operationId: `${read.operationId}-control` })).stdout.toString()).toBe('tok-s3cret');
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('leaves no route to the host network when the profile says network none', async () => {
    const { stdout } = await run(fx.executor, sh(connect()));
    expect(stdout.toString()).toMatch(/^(ENETUNREACH|ECONNREFUSED)\n$/);
  });

  it('still reaches the host network when the profile allows it (the check above can fail)', async () => {
    await fx.cleanup();
    contained({ network: 'bridge' });
    const { stdout } = await run(fx.executor, sh(connect()));
    expect(stdout.toString()).toBe('connected\n');
  });

  it('cancel ends the contained tree', async () => {
    const s = sh('sleep 1000 & sleep 1000; wait');
    await fx.executor.submit(s);
    const { pid } = await fx.executor.status(s.operationId);
    const sleeps = () => groupMembers(pid!).filter((m) => readFileSync(`/proc/${m}/cmdline`, 'utf8').startsWith('sleep\0')).length;
    await waitFor(sleeps, { until: (n) => n === 2, timeoutMs: 5_000, what: 'both sleeps of the contained tree' });
    const receipt = await fx.executor.cancel(s.operationId);
    expect(receipt).toMatchObject({ state: 'exited', cancelled: true });
    expect(isLive(pid!)).toBe(false);
    expect(groupMembers(pid!)).toEqual([]);
  });

  it('gives the command normal signal behaviour (it is not the namespace pid 1) and its exit status', async () => {
    const { receipt, stdout } = await run(fx.executor, sh('trap "echo got-term; exit 3" TERM; kill -TERM $$; sleep 5; echo not-reached'));
    expect(stdout.toString()).toBe('got-term\n');
    expect(receipt.exitCode).toBe(3);
  });

  it('runs a PTY command contained as well', async () => {
    const s = spec(['/bin/sh', '-c', 'stty size; touch /x 2>/dev/null || echo refused'], { cwd: workspace, pty: { cols: 80, rows: 24 } });
    await fx.executor.submit(s);
    // bwrap's private /dev shows the terminal as /dev/console; it is the same terminal.
    expect((await collect(fx.executor, s.operationId, 'pty')).toString()).toBe('24 80\r\nrefused\r\n');
  });
});

/** Live processes in the process group `pgid`. */
function groupMembers(pgid: number): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') found.push(Number(name));
    } catch {
      // gone
    }
  }
  return found;
}
