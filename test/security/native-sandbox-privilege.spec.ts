/**
 * A contained command (and a native build) of a root server holds no privilege: no capability, no nested user
 * namespace, not root's files. Each attack here worked when bwrap ran as root with every capability: a remount made
 * the host's /etc and a version writable, an umount showed the data directory, root-only files were read.
 */
import { existsSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokens } from '../e2e/berth-server.ts';
import { build, createNamed, putFile } from '../e2e/content-client.ts';
import { asRoot, bwrap, sandboxGround, type SandboxGround } from './native-sandbox-fixture.ts';

describe.skipIf(!bwrap)('a contained command holds no privilege', () => {
  let g: SandboxGround;
  const probe = `/etc/berth-sandbox-probe-${process.pid}`;

  beforeAll(async () => {
    g = await sandboxGround('Privilege');
  }, 120_000);
  afterAll(async () => {
    rmSync(probe, { force: true });
    await g?.close();
  });

  it('has no effective capability', async () => {
    const { stdout } = await g.sh('grep CapEff /proc/self/status');
    expect(stdout).toBe('CapEff:\t0000000000000000\n');
  });

  it('cannot remount the read-only host writable, and the host file stays absent', async () => {
    const { stdout } = await g.sh(`mount -o remount,bind,rw /etc 2>/dev/null && echo remounted; echo pwned > ${probe} 2>/dev/null && echo wrote; true`);
    expect(stdout).toBe('');
    expect(existsSync(probe)).toBe(false);
  });

  it('cannot remount its version writable, and the version stays as built', async () => {
    const mount = `/env/${g.env.slug}`;
    const { stdout } = await g.sh(`mount -o remount,rw ${mount} 2>/dev/null && echo remounted; echo changed > ${mount}/data.txt 2>/dev/null && echo wrote; cat ${mount}/data.txt`);
    expect(stdout).toBe('pristine\n');
    const version = join(g.dataDir, 'environments', g.env.id, 'versions', '1', 'data.txt');
    expect(readFileSync(version, 'utf8')).toBe('pristine\n');
  });

  it('cannot unmount what hides the data directory', async () => {
    expect(readdirSync(g.dataDir).length).toBeGreaterThan(0);
    const { stdout } = await g.sh(`umount ${g.dataDir} 2>/dev/null && echo unmounted; ls -A ${g.dataDir} 2>/dev/null | head -3; true`);
    expect(stdout).toBe('');
  });

  it('cannot make a nested user namespace (which would give it capabilities there)', async () => {
    const { stdout } = await g.sh('unshare -U true 2>/dev/null && echo nested; unshare -Ur true 2>/dev/null && echo nested-root; true');
    expect(stdout).toBe('');
  });

  it.skipIf(!asRoot)('runs as the sandbox identity, which reads neither /etc/shadow nor a root-only 0600 file', async () => {
    expect(statSync(g.secret).mode & 0o777).toBe(0o600);
    const { stdout } = await g.sh(`id -u; cat /etc/shadow >/dev/null 2>&1 && echo shadow-read; cat ${g.secret} 2>/dev/null; true`);
    expect(stdout).toBe('65534\n');
  });

  it('has its private /tmp as HOME, not the server home', async () => {
    const { stdout } = await g.sh('echo "$HOME"');
    expect(stdout).toBe('/tmp\n');
  });

  it("sees neither the server's processes nor another tenant's, and cannot signal them", async () => {
    const bob = await createNamed(g.server, 'Bob Sleeps', tokens.bob, { contain: true });
    const marker = `berth-bob-${process.pid}`;
    const sleeping = g.server.json('/v1/executions', {
      body: { operationId: `bob-${process.pid}`, environment: bob.id, command: ['/bin/sh', '-c', 'sleep 20; :', marker] },
      token: tokens.bob,
    });
    await sleeping;
    const bobPid = await until(() => hostPidsWith(marker)[0]);
    const serverPid = g.server.process.child.pid!;
    const { stdout } = await g.sh(
      `cat /proc/${serverPid}/environ 2>/dev/null | tr '\\0' '\\n' | grep -c BERTH_TOKEN; kill -9 ${bobPid} 2>/dev/null && echo killed; ls /proc | grep -c '^[0-9]'`,
    );
    const [tokenLines, ...rest] = stdout.trim().split('\n');
    expect(tokenLines).toBe('0');
    expect(rest.slice(0, -1)).toEqual([]); // no "killed"
    expect(Number(rest.at(-1))).toBeLessThan(6); // its own few processes only
    expect(existsSync(`/proc/${bobPid}`)).toBe(true);
  });

  it('a native build cannot remount, and its planted links make Berth change no host file', async () => {
    const before = statSync(g.secret);
    const env = await createNamed(g.server, 'Planting Build', tokens.alice, { contain: true });
    const script = [
      `mount -o remount,bind,rw /var 2>/dev/null; chmod 666 ${g.secret} 2>/dev/null`,
      `ln -s ${g.secret} planted-link; ln ${g.secret} planted-hard 2>/dev/null`,
      `mkdir -p sub && ln -s ${g.shown} sub/dir-link`,
      'exit 0',
    ].join('\n');
    await putFile(g.server, env.id, 'setup.sh', `${script}\n`);
    const record = await build(g.server, env.id);
    expect(record.status, record.log).toBe('ready');
    expect(record.log).toContain('$ sh setup.sh');
    const after = statSync(g.secret);
    expect({ mode: after.mode, uid: after.uid, gid: after.gid }).toEqual({ mode: before.mode, uid: before.uid, gid: before.gid });
    expect(statSync(g.shown).mode & 0o777).toBe(0o755);
    expect(readFileSync(g.secret, 'utf8')).toBe('host-secret\n');
  }, 120_000);
});

function hostPidsWith(marker: string): number[] {
  const found: number[] = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      // The shell itself (`/bin/sh -c … marker`), not the setpriv or bwrap that started it.
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (argv[0] === '/bin/sh' && argv.includes(marker)) found.push(Number(pid));
    } catch {
      // gone
    }
  }
  return found;
}

async function until<T>(look: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = look();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('not seen in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}
