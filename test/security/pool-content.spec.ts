/**
 * A warm claim's content version against hostile tenants (issue 20): the version a claim shows is the claiming
 * environment's only, so another tenant's claim (with its own version, or none) sees nothing of it; and a version
 * whose build planted links pointing out of it (to a host secret, up the tree, to /) shows them as links that
 * resolve inside the container, as a cold bind does: filling the container never follows them on the host. The fill
 * hard-links the version's files (the container and the version share each inode), so not even root in the container
 * can change one: the volume is read-only and cannot be remounted.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { build, putFile, run } from '../e2e/content-client.ts';
import { dockerAvailable, execIn } from '../integration/docker-env.ts';
import { POOL_PROFILE as PROFILE, startPoolServer, type PoolServer } from './pool-server.ts';

const SECRET = `host-secret-${process.pid}-${Date.now()}`;
let pool: PoolServer;
let server: BerthServer;
let hostDir: string;

beforeAll(async () => {
  if (!dockerAvailable) return;
  hostDir = mkdtempSync(join(tmpdir(), 'berth-pool-content-'));
  writeFileSync(join(hostDir, 'secret.txt'), SECRET);
  pool = await startPoolServer('sec-content', 2);
  server = pool.server;
}, 90_000);
afterAll(async () => {
  await pool?.close();
  if (hostDir) rmSync(hostDir, { recursive: true, force: true });
});

const ready = () => pool.ready();
const claims = () => pool.claims();
const claim = (token: string, environmentId: string) => pool.acquire(token, environmentId);
const slugOf = async (token: string, environmentId: string) => (await server.json<{ slug: string }>(`/v1/environments/${environmentId}`, { token })).slug;

describe.skipIf(!dockerAvailable)('a warm claim\'s content version and other tenants', () => {
  it('should show each tenant only its own version: another claim, with a version or none, sees nothing of it', async () => {
    const aliceEnv = await createEnvironment(server, tokens.alice, PROFILE);
    await putFile(server, aliceEnv, 'alice-secret.txt', 'alice only', tokens.alice);
    expect(await build(server, aliceEnv, tokens.alice)).toMatchObject({ status: 'ready', active: true });
    const alice = await claim(tokens.alice, aliceEnv);
    const aliceSlug = await slugOf(tokens.alice, aliceEnv);

    const bobEnv = await createEnvironment(server, tokens.bob, PROFILE);
    await putFile(server, bobEnv, 'bob.txt', 'bob', tokens.bob);
    expect(await build(server, bobEnv, tokens.bob)).toMatchObject({ status: 'ready', active: true });
    const bob = await claim(tokens.bob, bobEnv);
    expect(bob.identity.resourceId).not.toBe(alice.identity.resourceId);
    expect(await claims()).toMatchObject({ hit: 2, fallback: 0 });

    const bobSees = await run(server, bobEnv, 'find /env | sort; grep -rl "alice only" /env /tmp $HOME /workspace 2>/dev/null; echo end', tokens.bob);
    expect(bobSees.record).toMatchObject({ status: 'exited', version: 1 });
    const bobSlug = await slugOf(tokens.bob, bobEnv);
    expect(bobSees.stdout.trim().split('\n')).toEqual(['/env', `/env/${bobSlug}`, `/env/${bobSlug}/bob.txt`, 'end']);

    // Bob's claim filled his own container only: Alice's still shows her version, whole.
    const aliceLooks = await execIn(alice.identity.resourceId, ['/bin/sh', '-c', 'find /env | sort']);
    expect(aliceLooks.output.trim().split(/\r?\n/)).toEqual(['/env', `/env/${aliceSlug}`, `/env/${aliceSlug}/alice-secret.txt`]);

    // A claim of an environment with no version shows an empty /env, not the pool's last tenant's.
    await ready();
    const carolEnv = await createEnvironment(server, tokens.bob, PROFILE);
    const carol = await claim(tokens.bob, carolEnv);
    expect([alice.identity.resourceId, bob.identity.resourceId]).not.toContain(carol.identity.resourceId);
    const carolLooks = await execIn(carol.identity.resourceId, ['/bin/sh', '-c', 'ls -A /env; echo end']);
    expect(carolLooks.output.trim()).toBe('end');
  }, 240_000);

  it('should leave the version\'s files, which a claim shares by hard link, unchangeable from the container, even by root', async () => {
    await ready();
    const env = await createEnvironment(server, tokens.alice, PROFILE);
    await putFile(server, env, 'tool.sh', 'echo original', tokens.alice);
    expect(await build(server, env, tokens.alice)).toMatchObject({ status: 'ready', active: true });
    const slug = await slugOf(tokens.alice, env);
    const hits = (await claims()).hit;
    const claimed = await claim(tokens.alice, env);
    expect((await claims()).hit).toBe(hits + 1); // a warm claim, not a cold container binding the version itself
    const version = join(server.dataDir, 'environments', env, 'versions', '1', 'tool.sh');
    const before = statSync(version);
    // The claim linked the file in (no copy): the inode the container sees through /env is the version's own.
    const shown = (await execIn(claimed.identity.resourceId, ['/bin/sh', '-c', `stat -c %i /env/${slug}/tool.sh`])).output.trim();
    expect(Number(shown)).toBe(before.ino);

    const attempts = [
      `echo changed > /env/${slug}/tool.sh`,
      `echo more >> /env/${slug}/tool.sh`,
      `chmod 777 /env/${slug}/tool.sh`,
      `touch -d 2001-01-01 /env/${slug}/tool.sh`,
      `rm -f /env/${slug}/tool.sh`,
      `mv -f /env/${slug}/tool.sh /env/${slug}/moved`,
      `ln /env/${slug}/tool.sh /env/${slug}/another`,
      `mount -o remount,rw /env`,
    ];
    const script = attempts.map((a, i) => `(${a}) 2>/dev/null && echo "done ${i}"`).join('; ');
    const asRoot = await execIn(claimed.identity.resourceId, ['/bin/sh', '-c', `${script}; echo end`], '0:0');
    expect(asRoot.output.trim()).toBe('end');
    const after = statSync(version);
    expect(readFileSync(version, 'utf8')).toBe('echo original');
    expect({ mode: after.mode, mtime: after.mtimeMs, size: after.size, ino: after.ino }).toEqual({ mode: before.mode, mtime: before.mtimeMs, size: before.size, ino: before.ino });
  }, 240_000);

  it('should show links pointing out of a version as links resolved in the container, never the host files they name', async () => {
    await ready();
    const env = await createEnvironment(server, tokens.alice, PROFILE);
    const secret = join(hostDir, 'secret.txt');
    // The build runs in the environment's image and may plant anything in its version; these point at the host.
    await putFile(server, env, 'setup.sh', [`ln -s ${secret} abs-secret`, `ln -s ../../../../../../../..${secret} up-secret`, `ln -s ${hostDir} host-dir`, 'ln -s / root'].join('\n'), tokens.alice);
    expect(await build(server, env, tokens.alice)).toMatchObject({ status: 'ready', active: true });
    const slug = await slugOf(tokens.alice, env);
    const before = await claims();

    const seen = await run(
      server,
      env,
      [
        `cd /env/${slug}`,
        'for l in abs-secret up-secret host-dir root; do [ -L "$l" ] && echo "$l -> $(readlink "$l")"; done',
        'cat abs-secret up-secret host-dir/secret.txt 2>/dev/null',
        `grep -rl ${SECRET} /env 2>/dev/null`,
        'echo end',
      ].join('; '),
      tokens.alice,
    );
    expect((await claims()).hit).toBe(before.hit + 1);
    expect(seen.record).toMatchObject({ status: 'exited', version: 1 });
    expect(seen.stdout).not.toContain(SECRET);
    expect(seen.stdout.trim().split('\n')).toEqual([
      `abs-secret -> ${secret}`,
      `up-secret -> ../../../../../../../..${secret}`,
      `host-dir -> ${hostDir}`,
      'root -> /',
      'end',
    ]);
  }, 240_000);
});
