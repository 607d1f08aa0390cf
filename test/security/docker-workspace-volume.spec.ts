/**
 * What a Docker workspace view does not open, on a real engine: a command's links in /workspace never lead the
 * server's file host out of the volume (captured as links, never followed by an apply); a member cannot size a view
 * past the admin's ceiling; the file host hands out an allocation's own volume only, never another's, nor a volume
 * someone else put under its name.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL, resourceNames } from '../../src/providers/docker/labels.ts';
import type { AllocationRef } from '../../src/providers/provider.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { defaultRolePolicy } from '../../src/runtime/role-policy.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { checkpointOf } from '../fixtures/file-host-fixture.ts';
import { dockerViewBed } from '../fixtures/docker-view-bed.ts';
import { dockerAvailable, execIn, rawDocker, removeTestResources } from '../integration/docker-env.ts';
import { startTestBerth, tempDir } from '../integration/executions-harness.ts';

const bed = dockerViewBed();
const { run, provider, capture, newIntent, allocated } = bed;

describe.skipIf(!dockerAvailable)('a Docker workspace volume keeps the server inside it', () => {
  let ref: AllocationRef;
  /** A host directory standing for Berth's data directory: what a link must never lead a write into. */
  let hostDir: string;
  const escape = `berth-escape-${randomUUID()}`;

  beforeAll(async () => {
    bed.open();
    ref = await allocated(newIntent());
    hostDir = mkdtempSync('/var/tmp/berth-workspace-volume-');
  }, 60_000);
  afterAll(async () => {
    rmSync(hostDir, { recursive: true, force: true });
    rmSync(`/${escape}`, { force: true });
    await bed.close();
  });

  it('should capture a command\'s links to / and to a host directory as links, and never write through them', async () => {
    const made = await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', `ln -s / /workspace/evil && ln -s ${hostDir} /workspace/data && echo ok`]);
    expect(made.output).toContain('ok');
    const host = await provider.fileHost(ref);
    const captured = await capture(host);
    expect(captured.entries).toEqual([
      expect.objectContaining({ path: 'data', type: 'symlink', target: hostDir }),
      expect.objectContaining({ path: 'evil', type: 'symlink', target: '/' }),
    ]);

    // A checkpoint that has files under those names, applied over the view that holds the links (from the capture
    // that recorded them, and from nothing): the links are replaced in the volume, nothing is written through them.
    const target = await checkpointOf(bed.packs, { 'data/': '', [`data/${escape}`]: 'out\n', 'evil/': '', [`evil/${escape}`]: 'out\n' });
    for (const base of [captured, undefined]) {
      await host.apply(target, base, bed.packs.source());
      expect(existsSync(`/${escape}`)).toBe(false);
      expect(readdirSync(hostDir)).toEqual([]);
      const seen = await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', `stat -c "%F %n" /workspace/evil /workspace/data; cat /workspace/evil/${escape}`]);
      expect(seen.output.replace(/\r/g, '')).toBe('directory /workspace/evil\ndirectory /workspace/data\nout\n');
      await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', `rm -rf /workspace/evil /workspace/data && ln -s / /workspace/evil && ln -s ${hostDir} /workspace/data`]);
    }
  });

  it('should never hand out another allocation\'s volume, nor a volume put under its name by someone else', async () => {
    const other = await allocated(newIntent());
    const mine = await provider.fileHost(ref);
    // Another allocation's identity with this request id (or the reverse): the labels do not match, refused.
    for (const forged of [{ ...ref, allocationId: other.allocationId }, { ...other, requestId: ref.requestId }, { ...ref, environmentId: other.environmentId }]) {
      await expect(provider.fileHost(forged)).rejects.toMatchObject({ code: 'unavailable', detail: { reason: 'not_this_allocation' } });
    }
    // Each allocation's host sees its own volume only.
    await mine.apply(await checkpointOf(bed.packs, { [`mine-${escape}`]: 'a\n' }), undefined, bed.packs.source());
    const theirs = await capture(await provider.fileHost(other));
    expect(theirs.entries.map((e) => e.path)).not.toContain(`mine-${escape}`);

    // A volume made under an allocation's name before it was allocated, without its labels: never adopted.
    const squatted = newIntent();
    const name = resourceNames(squatted.requestId).workspace;
    await rawDocker.createVolume({ Name: name, Labels: { ...run, [LABEL.managed]: 'true' } });
    expect(await provider.allocate(squatted)).toMatchObject({ status: 'unknown', reason: expect.stringContaining(name) });
    await expect(provider.fileHost(squatted)).rejects.toMatchObject({ code: 'unavailable', detail: { reason: 'not_this_allocation' } });
  });
});

describe.skipIf(!dockerAvailable)('a member\'s workspace view stays under the admin\'s ceiling', () => {
  const dir = tempDir('berth-workspace-volume-sec-');
  const member: Caller = { scope: 'tenant-a', role: 'member' };
  let berth: Berth;

  beforeAll(async () => {
    const policy = { ...defaultRolePolicy, ceilings: { ...defaultRolePolicy.ceilings, workspaceMb: 16 } };
    berth = await startTestBerth(dir.path, run, 'rt_test', { policy });
  }, 60_000);
  afterAll(async () => {
    await berth?.stop();
    await removeTestResources(run);
    dir.remove();
  });

  it('should refuse a huge workspaceMb with quota_exceeded, and size an unset one at the ceiling', async () => {
    await expect(berth.api.createEnvironment(member, { name: 'huge view', profile: { provider: 'docker', workspaceMb: 1_048_576 } })).rejects.toMatchObject({
      code: 'quota_exceeded',
      detail: { quota: 'workspaceMb', limit: 16, requested: 1_048_576 },
    });
    const env = await berth.api.createEnvironment(member, { name: 'small view', profile: { provider: 'docker', network: 'none' } });
    expect(env.profile.workspaceMb).toBe(16);
    const allocation = await berth.api.acquire(member, env.id);
    const probe = await execIn(allocation.identity!.resourceId, ['/bin/sh', '-c', 'grep " /workspace " /proc/mounts']);
    expect(probe.output).toContain('size=16384k');
  });
});
