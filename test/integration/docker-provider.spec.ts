/** The Docker provider's allocation lifecycle against a real engine (DESIGN §6). */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { containerSpec, networkSpec, volumeSpec, workspaceVolumeSpec } from '../../src/providers/docker/container-spec.ts';
import { DockerProvider } from '../../src/providers/docker/docker-provider.ts';
import { layOutThroughArchive } from '../../src/providers/docker/spool-volume.ts';
import { allocationLabels, LABEL, resourceNames } from '../../src/providers/docker/labels.ts';
import type { AllocationIntent, AllocationReport, PhysicalIdentity } from '../../src/providers/provider.ts';
import { dockerAvailable, dockerEndpoint, execIn, newAllocationIntent, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';
import { expectContainedCommands, expectHardened } from './docker-hardening.ts';

const run = newTestRun();
const provider = new DockerProvider({ endpoint: dockerEndpoint, extraLabels: run });

function readyIdentity(report: AllocationReport): PhysicalIdentity {
  if (report.status !== 'ready') throw new Error(`expected ready, got ${JSON.stringify(report)}`);
  return report.identity;
}

async function leftovers(intent: AllocationIntent) {
  const filters = { label: [`${LABEL.requestId}=${intent.requestId}`] };
  const [containers, networks, volumes] = await Promise.all([
    rawDocker.listContainers({ all: true, filters }),
    rawDocker.listNetworks({ filters }),
    rawDocker.listVolumes({ filters }),
  ]);
  return { containers: containers.length, networks: networks.length, volumes: (volumes.Volumes ?? []).length };
}

describe.skipIf(!dockerAvailable)('DockerProvider on a real engine', () => {
  afterAll(() => removeTestResources(run));

  it('should answer available() when the engine is up', async () => {
    expect(await provider.available()).toBe(true);
  });

  it('should create a locked-down, labelled container on its own bridge network', async () => {
    const intent = newAllocationIntent({ memoryMb: 256, pidsLimit: 64, cpus: 0.5 });
    const identity = readyIdentity(await provider.allocate(intent));
    const info = await rawDocker.getContainer(identity.resourceId).inspect();

    expect(identity.incarnation).toBe(`${info.Id}@${info.State.StartedAt}`);
    expectHardened(info, { memoryMb: 256, pidsLimit: 64, cpus: 0.5 });
    expect(info.Config.Labels).toMatchObject({
      [LABEL.managed]: 'true',
      [LABEL.environmentId]: intent.environmentId,
      [LABEL.allocationId]: intent.allocationId,
      [LABEL.requestId]: intent.requestId,
      [LABEL.generation]: '1',
    });

    const networkMode = info.HostConfig.NetworkMode!;
    expect(['default', 'bridge', 'host', 'none']).not.toContain(networkMode);
    const network = await rawDocker.getNetwork(identity.networkId!).inspect();
    expect(network.Name).toBe(networkMode);
    expect(network.Driver).toBe('bridge');
    expect(network.Labels?.[LABEL.requestId]).toBe(intent.requestId);

    await expectContainedCommands(identity.resourceId);
  });

  it('should run without any network when the profile says none', async () => {
    const intent = newAllocationIntent({ network: 'none' });
    const identity = readyIdentity(await provider.allocate(intent));
    const info = await rawDocker.getContainer(identity.resourceId).inspect();
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect(identity.networkId).toBeUndefined();
    expect((await leftovers(intent)).networks).toBe(0);
  });

  it('should adopt the same container when allocate is repeated with the same request id', async () => {
    const intent = newAllocationIntent();
    const first = readyIdentity(await provider.allocate(intent));
    const second = readyIdentity(await provider.allocate(intent));
    expect(second).toEqual(first);
    expect(await leftovers(intent)).toEqual({ containers: 1, networks: 1, volumes: 2 });
  });

  it('should leave no container, network or volume after deallocate, and confirm it', async () => {
    const intent = newAllocationIntent();
    const identity = readyIdentity(await provider.allocate(intent));
    expect(await provider.deallocate({ ...intent, identity })).toBe('terminated');
    expect(await leftovers(intent)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    expect(await provider.inspect({ ...intent, identity })).toEqual({ status: 'absent' });
    expect(await provider.deallocate({ ...intent, identity })).toBe('terminated');
  });

  it('should report a created-but-never-started container as pending and resume it on allocate', async () => {
    const intent = newAllocationIntent();
    // What a runtime that crashed between create and start leaves behind.
    const names = resourceNames(intent.requestId);
    const labels = allocationLabels(intent, run);
    await rawDocker.createNetwork(networkSpec(names, labels));
    await rawDocker.createVolume(volumeSpec(names, labels));
    await rawDocker.createVolume(workspaceVolumeSpec(names, labels, intent.profile));
    const created = await rawDocker.createContainer(containerSpec(intent, names, labels));

    const inspected = await provider.inspect(intent);
    expect(inspected).toMatchObject({ status: 'pending', identity: { resourceId: created.id } });

    const identity = readyIdentity(await provider.allocate(intent));
    expect(identity.resourceId).toBe(created.id);
    expect((await rawDocker.getContainer(created.id).inspect()).State.Running).toBe(true);
    expect(await leftovers(intent)).toEqual({ containers: 1, networks: 1, volumes: 2 });
    const probe = await execIn(identity.resourceId, ['/bin/sh', '-c', 'touch /berth/spool/ops/x && echo ok']);
    expect(probe.output).toContain('ok');
  });

  it('should lay out the spool through the archive API when the volume is not reachable from this host', async () => {
    const intent = newAllocationIntent({ network: 'none' });
    const names = resourceNames(intent.requestId);
    const labels = allocationLabels(intent, run);
    await rawDocker.createVolume(volumeSpec(names, labels));
    await rawDocker.createVolume(workspaceVolumeSpec(names, labels, intent.profile));
    const container = await rawDocker.createContainer(containerSpec(intent, names, labels));
    await layOutThroughArchive(container);
    await container.start();
    const probe = await execIn(container.id, [
      '/bin/sh',
      '-c',
      'stat -c "%u %a %n" /berth/spool/ops /berth/spool/supervisor.sh; touch /berth/spool/ops/x && echo ops-writable; echo >> /berth/spool/supervisor.sh 2>/dev/null || echo supervisor-readonly',
    ]);
    expect(probe.output).toContain('1000 755 /berth/spool/ops');
    expect(probe.output).toContain('0 555 /berth/spool/supervisor.sh');
    expect(probe.output).toContain('ops-writable');
    expect(probe.output).toContain('supervisor-readonly');
  });

  it('should say absent when the acknowledged container was removed behind its back, leftovers notwithstanding', async () => {
    const intent = newAllocationIntent();
    const identity = readyIdentity(await provider.allocate(intent));
    await rawDocker.getContainer(identity.resourceId).remove({ force: true });

    expect(await provider.inspect({ ...intent, identity })).toEqual({ status: 'absent' });
    // Never acknowledged: the same leftovers are a creation stopped half-way.
    expect(await provider.inspect(intent)).toMatchObject({ status: 'pending' });
    expect(await provider.deallocate({ ...intent, identity })).toBe('terminated');
    expect(await leftovers(intent)).toEqual({ containers: 0, networks: 0, volumes: 0 });
  });

  it('should fence a container restarted behind its back', async () => {
    const intent = newAllocationIntent();
    const identity = readyIdentity(await provider.allocate(intent));
    expect(await provider.inspect({ ...intent, identity })).toEqual({ status: 'ready', identity });

    await rawDocker.getContainer(identity.resourceId).restart({ t: 0 });
    const report = await provider.inspect({ ...intent, identity });
    expect(report.status).toBe('fenced');
    if (report.status !== 'fenced') return;
    expect(report.identity.resourceId).toBe(identity.resourceId);
    expect(report.identity.incarnation).not.toBe(identity.incarnation);
    expect(report.reason).toMatch(/incarnation changed/);
  });

  it('should fence a container stopped behind its back, and never restart it', async () => {
    const intent = newAllocationIntent();
    const identity = readyIdentity(await provider.allocate(intent));
    await rawDocker.getContainer(identity.resourceId).kill({ signal: 'SIGKILL' });

    expect(await provider.inspect({ ...intent, identity })).toMatchObject({ status: 'fenced', reason: /exited/ });
    expect(await provider.allocate(intent)).toMatchObject({ status: 'fenced' });
    expect((await rawDocker.getContainer(identity.resourceId).inspect()).State.Running).toBe(false);
  });

  it('should refuse an image that is not on the host without leaving anything behind', async () => {
    const intent = newAllocationIntent({ image: `berth-missing-${randomUUID()}:latest` });
    const error = await provider.allocate(intent).catch((e: unknown) => e);
    expect(isBerthError(error, 'environment_invalid')).toBe(true);
    expect(await leftovers(intent)).toEqual({ containers: 0, networks: 0, volumes: 0 });
  });
});

describe('DockerProvider with an unreachable engine', () => {
  const bogus = new DockerProvider({ endpoint: { socketPath: `/tmp/berth-no-such-${randomUUID()}.sock` } });

  it('should be unavailable, refuse to allocate having sent nothing, and report unknown, never absent', async () => {
    const intent = newAllocationIntent();
    expect(await bogus.available()).toBe(false);
    await expect(bogus.allocate(intent)).rejects.toMatchObject({ code: 'provider_unavailable' });
    expect(await bogus.inspect(intent)).toMatchObject({ status: 'unknown' });
    expect(await bogus.deallocate(intent)).toBe('unknown');
  });
});
