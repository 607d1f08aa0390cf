/**
 * What a Docker command's writable, executable HOME does not open, on a real engine: it is mounted nosuid and nodev,
 * the unprivileged command user cannot make a root-owned or device file in it, and it is a mount of its own, apart
 * from the spool volume, whose supervisor stays read-only to the command.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Berth } from '../../src/runtime/berth.ts';
import { dockerAvailable, newTestRun, removeTestResources } from '../integration/docker-env.ts';
import { caller, run, startTestBerth, tempDir } from '../integration/executions-harness.ts';

const testRun = newTestRun();
const dir = tempDir('berth-docker-home-sec-');
let berth: Berth;
let env: string;

/** Runs `script` in the environment; answers its stdout lines. */
const lines = async (script: string) => (await run(berth.api, env, ['/bin/sh', '-c', script])).stdout.trim().split('\n');

describe.skipIf(!dockerAvailable)('a Docker command\'s HOME opens no privilege', () => {
  beforeAll(async () => {
    berth = await startTestBerth(dir.path, testRun);
    env = (await berth.api.createEnvironment(caller, { name: 'home attacks', profile: { provider: 'docker', network: 'none' } })).id;
  }, 60_000);
  afterAll(async () => {
    await berth?.stop();
    await removeTestResources(testRun);
    dir.remove();
  });

  it('should mount HOME nosuid and nodev, as its own mount beside the spool volume', async () => {
    const [home, spool] = await lines('grep " $HOME " /proc/mounts; grep " /berth/spool " /proc/mounts');
    const options = home.split(' ')[3].split(',');
    expect(options).toEqual(expect.arrayContaining(['rw', 'nosuid', 'nodev']));
    expect(home.split(' ')[2]).toBe('tmpfs');
    expect(spool.split(' ')[1]).toBe('/berth/spool');
  });

  it('should not let the command user make a root-owned, setuid or device file count', async () => {
    const out = await lines(
      [
        'cp /bin/busybox "$HOME/busybox" && chmod 4755 "$HOME/busybox"',
        'chown 0:0 "$HOME/busybox" 2>/dev/null && echo chown-root-ok || echo chown-refused',
        'echo "setuid-copy-runs-as=$("$HOME/busybox" id -u)"',
        'mknod "$HOME/mem" c 1 1 2>/dev/null && echo mknod-ok || echo mknod-refused',
        'echo x >> /berth/spool/supervisor.sh 2>/dev/null && echo supervisor-writable || echo supervisor-read-only',
        'echo "uid=$(id -u)"',
      ].join('; '),
    );
    expect(out).toEqual(['chown-refused', 'setuid-copy-runs-as=1000', 'mknod-refused', 'supervisor-read-only', 'uid=1000']);
  });
});
