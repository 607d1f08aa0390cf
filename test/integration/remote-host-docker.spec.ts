/**
 * The Execution Host's Docker backend and its workspace file host: one control plane (a real `berth serve`, its own
 * Docker provider off) and one `berth host --docker` on a Unix socket. A profile `{provider: remote, host, backend:
 * docker}` runs its commands in a container on the host's engine, with the local Docker provider's hardening, exact
 * output and exit codes, stdin and PTY resize over the execution WebSocket, and cancel. A sandbox (a workspace and
 * its turns) on a remote allocation, Docker or native, sees one workspace: a tool's file is there for the next
 * remote command, and a command's file is readable through the file tools once its checkpoint is taken.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Berth, type Sandbox } from '../../src/client/index.ts';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { interactiveCases, remoteDockerBed, remoteDockerProfile } from '../fixtures/remote-execution.ts';
import { startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, rawDocker } from './docker-env.ts';

const docker = remoteDockerProfile;

let hosts: TestHosts;
let server: BerthServer;
let environment: string;

beforeAll(async () => {
  if (!dockerAvailable) return;
  ({ hosts, server, environment } = await remoteDockerBed());
}, 180_000);

afterAll(async () => {
  await server?.close();
  await hosts?.close();
});

const output = async (id: string, stream = 'stdout') => (await server.call(`/v1/executions/${id}/output?stream=${stream}`)).text();

describe.skipIf(!dockerAvailable)('a remote environment on the host\'s Docker engine', () => {
  it('runs in a container of the host\'s engine with exact output, its exit code and the Docker hardening', async () => {
    const script = 'printf "out\\n%s" "$(id -u)"; printf err >&2; grep CapEff /proc/self/status >&2; touch /rootfs-write 2>/dev/null && echo writable >&2; exit 7';
    const record = await submit(server, environment, ['/bin/sh', '-c', script]);
    const done = await finished(server, record.id);
    expect(done).toMatchObject({ status: 'exited', exitCode: 7 });
    expect(done.pid).toBeUndefined();
    expect(await output(record.id)).toBe('out\n1000');
    // No capability, and a read-only root filesystem, as the local Docker provider makes them.
    expect(await output(record.id, 'stderr')).toBe('errCapEff:\t0000000000000000\n');
    const containers = await rawDocker.listContainers({ filters: { label: [`${LABEL.environmentId}=${environment}`] } });
    expect(containers).toHaveLength(1);
    const info = await rawDocker.getContainer(containers[0]!.Id).inspect();
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges');
  });

  interactiveCases(() => server, () => environment);

  it('cancels a running command in the container', async () => {
    const record = await submit(server, environment, ['/bin/sh', '-c', 'echo started; exec sleep 300']);
    await running(server, record.id);
    await waitFor(() => output(record.id), { what: 'started', until: (t) => t === 'started\n', timeoutMs: 20_000 });
    const cancel = await server.call(`/v1/executions/${record.id}/cancel`, { method: 'POST', body: {} });
    expect(cancel.status).toBeLessThan(300);
    expect((await finished(server, record.id)).status).toBe('cancelled');
    expect(await output(record.id)).toBe('started\n');
  });

  it('releasing the allocation removes its container, network and volumes from the host\'s engine', async () => {
    const record = await submit(server, environment, ['true']);
    await finished(server, record.id);
    const label = { label: [`${LABEL.environmentId}=${environment}`] };
    expect((await rawDocker.listVolumes({ filters: label })).Volumes?.length).toBeGreaterThan(0);
    const allocationId = (record.target as { allocationId: string }).allocationId;
    const released = await server.call(`/v1/environments/${environment}/allocations/${allocationId}`, { method: 'DELETE' });
    expect(released.status).toBe(200);
    const left = async () => (await rawDocker.listContainers({ all: true, filters: label })).length + ((await rawDocker.listVolumes({ filters: label })).Volumes?.length ?? 0);
    await waitFor(left, { what: 'the allocation\'s resources gone', until: (n) => n === 0, timeoutMs: 30_000 });
  });

  it('refuses the docker backend on a host that does not serve it, before anything runs', async () => {
    const plain = await startHosts(['unix']);
    const other = await startServer([], { BERTH_REMOTE_HOSTS: plain.hostsFile, BERTH_DOCKER: '0' });
    try {
      const id = await createEnvironment(other, tokens.alice, docker);
      const record = await other.call('/v1/executions', { method: 'POST', body: { operationId: 'no-docker', environment: id, command: ['true'] } });
      expect(record.status).toBe(400);
      expect((await record.json()).error).toMatchObject({ code: 'environment_invalid' });
    } finally {
      await other.close();
      await plain.close();
    }
  });
});

describe.skipIf(!dockerAvailable).each([
  ['docker', docker],
  ['native', { provider: 'remote', host: 'host-unix' } as const],
])('a workspace on a remote %s allocation', (_kind, profile) => {
  let berth: Berth;
  let sandbox: Sandbox;
  beforeAll(async () => {
    berth = await Berth.connect({ url: server.url, token: tokens.alice });
    sandbox = await berth.sandboxes.create({ profile });
  }, 180_000);
  afterAll(() => sandbox?.kill());

  it('shows a tool\'s file to the next command, and a command\'s file to the tools', async () => {
    await sandbox.files.write('notes/in.txt', 'from a tool\n');
    const result = await sandbox.run('cat notes/in.txt; pwd; printf "from a command" > notes/out.txt; mkdir -p deep/er; echo x > deep/er/y');
    expect(result).toMatchObject({ exitCode: 0, stdout: expect.stringMatching(/^from a tool\n.*\n$/) });
    expect(await sandbox.files.read('notes/out.txt')).toBe('from a command');
    expect(await sandbox.files.read('deep/er/y')).toBe('x\n');
    await sandbox.files.write('notes/in.txt', 'changed by a tool\n');
    expect((await sandbox.run('cat notes/in.txt; ls notes')).stdout).toBe('changed by a tool\nin.txt\nout.txt\n');
  });

  it('carries a file of several MiB both ways byte for byte', async () => {
    const big = Array.from({ length: 400_000 }, (_, i) => `line ${i}`).join('\n');
    const digest = createHash('sha256').update(big).digest('hex');
    await sandbox.files.write('big.txt', big);
    expect((await sandbox.run('sha256sum big.txt; tr l L < big.txt > big-out.txt')).stdout).toBe(`${digest}  big.txt\n`);
    expect(await sandbox.files.read('big-out.txt')).toBe(big.replaceAll('l', 'L'));
  });
});
