/**
 * A Docker allocation's workspace view on a real engine (issue 14): a staging volume at /workspace made with the
 * container, filled and captured through the provider's file host, where workspace executions run; a bounded tmpfs,
 * kept when the allocation is adopted again, gone after deallocate.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resourceNames } from '../../src/providers/docker/labels.ts';
import type { FileHost } from '../../src/providers/file-host.ts';
import type { AllocationIntent, AllocationRef, ExecSpec, Executor, Receipt } from '../../src/providers/provider.ts';
import { checkpointOf } from '../fixtures/file-host-fixture.ts';
import { dockerViewBed } from '../fixtures/docker-view-bed.ts';
import { dockerAvailable, execIn, rawDocker } from './docker-env.ts';

const bed = dockerViewBed();
const { provider, capture, newIntent, allocated } = bed;

/** Runs `script` in the allocation's view at `cwd`; answers its receipt and output. */
async function inView(executor: Executor, script: string, cwd = ''): Promise<{ receipt: Receipt; stdout: string; stderr: string }> {
  const spec: ExecSpec = {
    operationId: `op_${randomUUID()}`,
    command: ['/bin/sh', '-c', script],
    env: { PATH: '/usr/bin:/bin' },
    stdin: false,
    workspace: { source: '', cwd, hidden: ['.berth'] },
  };
  let receipt = await executor.submit(spec);
  while (receipt.state !== 'exited') {
    await executor.waitForChange(spec.operationId, 250);
    receipt = await executor.status(spec.operationId);
  }
  const read = async (stream: 'stdout' | 'stderr') => (await executor.read(spec.operationId, stream, 0, 1 << 20)).data.toString('utf8');
  return { receipt, stdout: await read('stdout'), stderr: await read('stderr') };
}

const paths = async (host: FileHost) => (await capture(host)).entries.map((e) => `${e.type}:${e.path}`);

describe.skipIf(!dockerAvailable)('a Docker allocation\'s workspace view', () => {
  let intent: AllocationIntent;
  let ref: AllocationRef;
  let executor: Executor;

  beforeAll(async () => {
    bed.open();
    intent = newIntent({ workspaceMb: 8, memoryMb: 256 });
    ref = await allocated(intent);
    executor = provider.executor(ref, intent.profile);
  }, 60_000);
  afterAll(async () => {
    await bed.close();
  });

  it('should say its views are materialized in the allocation', () => {
    expect(provider.workspaceView).toBe('materialized');
  });

  it('should mount a bounded tmpfs owned by the command user at /workspace', async () => {
    const probe = await execIn(ref.identity!.resourceId, ['/bin/sh', '-c', 'grep " /workspace " /proc/mounts; stat -c "%u:%g %a" /workspace']);
    expect(probe.output).toMatch(/^tmpfs \/workspace tmpfs rw,nosuid,nodev,.*size=8192k/m);
    expect(probe.output).toContain('1000:1000 755');
  });

  it('should show a file applied through the file host to a command run in the view', async () => {
    const host = await provider.fileHost(ref);
    await host.apply(await checkpointOf(bed.packs, { 'x': 'from the host\n', 'src/': '', 'src/y': 'nested\n' }), undefined, bed.packs.source());
    const { receipt, stdout } = await inView(executor, 'cat /workspace/x; pwd; cat y; stat -c "%u" y', 'src');
    expect(receipt).toMatchObject({ exitCode: 0 });
    expect(stdout).toBe('from the host\n/workspace/src\nnested\n1000\n');
  });

  it('should capture what a command wrote in the view', async () => {
    const host = await provider.fileHost(ref);
    const before = await capture(host);
    expect(before.entries.map((e) => e.path)).not.toContain('made/by-command');
    const { receipt } = await inView(executor, 'mkdir made && printf written > made/by-command && ln -s by-command made/link');
    expect(receipt.exitCode).toBe(0);
    const after = await capture(host, before);
    expect(after.entries).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: 'made/by-command', type: 'file', size: 7 }),
        expect.objectContaining({ path: 'made/link', type: 'symlink', target: 'by-command' }),
      ]),
    );
  });

  it('should give a cwd missing in the view the receipt error of a missing cwd', async () => {
    const { receipt } = await inView(executor, 'true', 'no/such/dir');
    expect(receipt).toMatchObject({ state: 'exited', exitCode: null, error: 'cwd' });
  });

  it('should refuse a workspace execution that names a cwd of its own, and one that steps out of the view', () => {
    expect(() => provider.admit({ cwd: '/tmp', workspace: { source: '', cwd: '', hidden: [] } })).toThrow(
      expect.objectContaining({ code: 'invalid_request', detail: expect.objectContaining({ reason: 'cwd_with_workspace' }) }),
    );
    expect(() => provider.admit({ workspace: { source: '', cwd: '../etc', hidden: [] } })).toThrow(
      expect.objectContaining({ code: 'invalid_request', detail: expect.objectContaining({ reason: 'cwd_not_confined' }) }),
    );
    expect(() => provider.admit({ workspace: { source: '', cwd: 'src', hidden: ['.berth'] } })).not.toThrow();
  });

  it('should hold the view to workspaceMb: writing past it fails with ENOSPC inside the container', async () => {
    const { receipt, stderr } = await inView(executor, 'dd if=/dev/zero of=/workspace/big bs=1M count=16; rc=$?; rm -f /workspace/big; exit $rc');
    expect(receipt.exitCode).not.toBe(0);
    expect(stderr).toMatch(/No space left on device/);
  });

  it('should keep the same volume, and what it holds, when the allocation is adopted again', async () => {
    const again = await allocated(intent);
    expect(again.identity).toEqual(ref.identity);
    expect(await paths(await provider.fileHost(again))).toEqual(expect.arrayContaining(['file:x', 'file:made/by-command']));
    const volumes = (await rawDocker.listVolumes({ filters: { label: [`berth.request-id=${intent.requestId}`] } })).Volumes ?? [];
    expect(volumes.map((v) => v.Name).sort()).toEqual([resourceNames(intent.requestId).volume, resourceNames(intent.requestId).workspace].sort());
  });

  it('should refuse a file host when the container does not run (its tmpfs is not mounted)', async () => {
    const stopped = await allocated(newIntent());
    await rawDocker.getContainer(stopped.identity!.resourceId).kill({ signal: 'SIGKILL' });
    await rawDocker.getContainer(stopped.identity!.resourceId).wait();
    await expect(provider.fileHost(stopped)).rejects.toMatchObject({ code: 'unavailable', detail: { reason: 'not_mounted' } });
    expect(await provider.deallocate(stopped)).toBe('terminated');
  });

  it('should remove the volume after the container on deallocate, and then say unavailable', async () => {
    const gone = await allocated(newIntent());
    const name = resourceNames(gone.requestId).workspace;
    expect((await rawDocker.getVolume(name).inspect()).Name).toBe(name);
    expect(await provider.deallocate(gone)).toBe('terminated');
    await expect(rawDocker.getVolume(name).inspect()).rejects.toMatchObject({ statusCode: 404 });
    await expect(provider.fileHost(gone)).rejects.toMatchObject({ code: 'unavailable', detail: { reason: 'volume_missing' } });
  });
});
