/**
 * A Docker command's scratch space, on a real engine: HOME is a tmpfs the command user owns and may run files from
 * (a script written there runs), sized by the profile's `homeMb` (default 512 MiB; writing past it fails with
 * ENOSPC), and writable whatever the image's own /tmp or passwd say.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Profile } from '../../schemas/profile.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { dockerAvailable, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';
import { caller, run, startTestBerth, tempDir } from './executions-harness.ts';

const testRun = newTestRun();
const dir = tempDir('berth-docker-home-');
/** berth-base with its /tmp made 0755 (root's only): the command has nowhere to write but HOME. */
const closedTmpImage = `berth-test-tmp0755:${testRun['berth.test-run']}`;
let berth: Berth;

async function imageWithClosedTmp(): Promise<void> {
  const container = await rawDocker.createContainer({ Image: 'berth-base:latest', User: '0:0', Cmd: ['chmod', '0755', '/tmp'], Labels: testRun });
  await container.start();
  expect((await container.wait()).StatusCode).toBe(0);
  const [repo, tag] = closedTmpImage.split(':');
  await container.commit({ repo, tag });
  await container.remove();
}

const environment = async (profile: Partial<Profile>, name: string) =>
  (await berth.api.createEnvironment(caller, { name, profile: { provider: 'docker', ...profile } })).id;

describe.skipIf(!dockerAvailable)('a Docker command\'s HOME', () => {
  beforeAll(async () => {
    berth = await startTestBerth(dir.path, testRun);
    await imageWithClosedTmp();
  }, 60_000);
  afterAll(async () => {
    await berth?.stop();
    await removeTestResources(testRun);
    await rawDocker.getImage(closedTmpImage).remove().catch(() => undefined);
    dir.remove();
  });

  it('should be the command user\'s own, executable, 512 MiB by default', async () => {
    const env = await environment({}, 'home default');
    const script = [
      'printf \'#!/bin/sh\\necho ran from $0\\n\' > "$HOME/hello.sh"',
      'chmod +x "$HOME/hello.sh"',
      '"$HOME/hello.sh"',
      'echo "home=$HOME uid=$(id -u) owner=$(stat -c %u:%a "$HOME")"',
      'grep " $HOME " /proc/mounts',
    ].join(' && ');
    const r = await run(berth.api, env, ['/bin/sh', '-c', script]);
    expect(r.stderr).toBe('');
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('ran from /home/berth/hello.sh');
    expect(r.stdout).toContain('home=/home/berth uid=1000 owner=1000:700');
    expect(r.stdout).toMatch(/[ ,]size=524288k[ ,]/);
  });

  it('should hold HOME to the profile\'s homeMb: writing past it fails with ENOSPC', async () => {
    const env = await environment({ homeMb: 8, memoryMb: 256 }, 'home 8 mib');
    const r = await run(berth.api, env, ['/bin/sh', '-c', 'dd if=/dev/zero of="$HOME/fill" bs=1048576 count=16; echo "kept $(du -k "$HOME/fill" | cut -f1)"']);
    expect(r.stderr).toContain('No space left on device');
    const kept = Number(/kept (\d+)/.exec(r.stdout)?.[1]);
    expect(kept).toBeGreaterThan(7 * 1024);
    expect(kept).toBeLessThanOrEqual(8 * 1024);
  });

  it('should give a writable HOME in an image whose /tmp is 0755', async () => {
    const env = await environment({ image: closedTmpImage }, 'home closed tmp');
    const r = await run(berth.api, env, ['/bin/sh', '-c', 'touch /tmp/x 2>/dev/null && echo tmp-writable; echo data > "$HOME/file" && cat "$HOME/file"']);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain('data');
  });
});
