/**
 * Shared by the Docker integration tests: finds the engine (DOCKER_HOST, else the socket of scripts/docker-up.sh,
 * else the default socket), decides whether the tests run, and labels everything they create so they only ever
 * touch their own containers, networks and volumes. Without an engine the tests are skipped and say so, unless
 * BERTH_REQUIRE_DOCKER=1, where a missing engine fails the run.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import type Docker from 'dockerode';
import type { Profile } from '../../schemas/profile.ts';
import { createDockerClient, type DockerEndpoint, endpointFromEnv } from '../../src/providers/docker/docker-client.ts';
import type { AllocationIntent, AllocationRef, Provider } from '../../src/providers/provider.ts';

const upScriptSocket = `${process.env.BERTH_DOCKER_DIR ?? '/tmp/berth-docker'}/docker.sock`;

export const dockerEndpoint: DockerEndpoint =
  !process.env.DOCKER_HOST && existsSync(upScriptSocket) ? { socketPath: upScriptSocket } : endpointFromEnv();

/** A plain dockerode client, for looking behind the provider's back. */
export const rawDocker: Docker = createDockerClient(dockerEndpoint, 30_000);

async function engineAnswers(): Promise<boolean> {
  try {
    await Promise.race([
      rawDocker.ping(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('ping timed out')), 3_000)),
    ]);
    return true;
  } catch {
    return false;
  }
}

export const dockerAvailable = await engineAnswers();

if (!dockerAvailable) {
  if (process.env.BERTH_REQUIRE_DOCKER === '1') {
    throw new Error(`BERTH_REQUIRE_DOCKER=1 but no Docker engine answers at ${JSON.stringify(dockerEndpoint)}`);
  }
  console.log('skipped: no Docker engine (run scripts/docker-up.sh)');
}

export const TEST_LABEL = 'berth.test-run';

/** A label value unique to one test file's run. */
export const newTestRun = (): { [TEST_LABEL]: string } => ({ [TEST_LABEL]: randomUUID() });

/** Removes every container, network and volume carrying these labels (a test run's, or a benchmark's on its engine). */
export async function removeTestResources(run: Record<string, string>, docker: Docker = rawDocker): Promise<void> {
  const filters = { label: Object.entries(run).map(([k, v]) => `${k}=${v}`) };
  for (const c of await docker.listContainers({ all: true, filters })) {
    await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  }
  for (const n of await docker.listNetworks({ filters })) {
    await docker.getNetwork(n.Id).remove().catch(() => undefined);
  }
  for (const v of (await docker.listVolumes({ filters })).Volumes ?? []) {
    await docker.getVolume(v.Name).remove().catch(() => undefined);
  }
}

/** An allocation intent of a Docker profile, with fresh ids. */
export const newAllocationIntent = (profile: Partial<Profile> = {}): AllocationIntent => ({
  environmentId: `henv_${randomUUID()}`,
  allocationId: `halloc_${randomUUID()}`,
  requestId: `hreq_${randomUUID()}`,
  generation: 1,
  profile: { provider: 'docker', ...profile },
});

/** Allocates `intent` and answers its ref; fails the test unless it is ready. */
export async function allocatedRef(provider: Provider, intent: AllocationIntent): Promise<AllocationRef> {
  const report = await provider.allocate(intent);
  if (report.status !== 'ready') throw new Error(`expected ready, got ${JSON.stringify(report)}`);
  return { ...intent, identity: report.identity };
}

/** Runs argv in the container through the exec API and returns its exit code and combined output. */
export async function execIn(
  containerId: string,
  argv: string[],
  user = '1000:1000',
): Promise<{ exitCode: number | null; output: string }> {
  const exec = await rawDocker.getContainer(containerId).exec({
    Cmd: argv,
    User: user,
    AttachStdout: true,
    AttachStderr: true,
    Tty: true,
  });
  const stream = await exec.start({ hijack: true, stdin: false, Tty: true });
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  await new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
  const info = await exec.inspect();
  return { exitCode: info.ExitCode, output: Buffer.concat(chunks).toString('utf8') };
}
