/**
 * A build's one-off container (seed 001 §4, §9): the installers of a Docker Environment run inside its own image, so
 * what they install runs where its executions run. The container has an allocation's hardening (container-spec.ts:
 * read-only root, no capabilities, no-new-privileges, UID 1000, the profile's limits and network) and sees nothing
 * of the host but the directories bound writable for it (the version being built, at /env/<slug>). Steps run as
 * Docker execs with their output streamed; a step past its timeout, or a stopping runtime, removes the container.
 * Everything carries the build's label, so recovery of an interrupted build removes what it left (`removeBuild`).
 */
import type Docker from 'dockerode';
import { BerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import type { BuildContainerHandle, BuildContainerOptions, BuildStep, BuildStepExit } from '../provider.ts';
import { buildContainerSpec, COMMAND_USER, networkSpec } from './container-spec.ts';
import { DEFAULT_PATH } from '../command-env.ts';
import { describeError, engineStatus, ignoreMissing } from './docker-client.ts';
import { runStreaming, runToEnd } from './docker-exec.ts';
import { buildLabels, LABEL, ownedBy, resourceNames, type Labels } from './labels.ts';

export type { BuildContainerOptions, BuildStep, BuildStepExit } from '../provider.ts';

export class BuildContainer implements BuildContainerHandle {
  private removed?: Promise<void>;

  private constructor(
    private readonly docker: Docker,
    private readonly streams: Docker,
    private readonly buildId: string,
    private readonly id: string,
    /** The image the build runs in. */
    readonly image: string,
    /** The image's own PATH: steps start from it. */
    readonly path: string,
  ) {}

  static async start(
    clients: { docker: Docker; streams: Docker },
    o: BuildContainerOptions,
    defaults: { image: string; labels: Labels },
  ): Promise<BuildContainer> {
    const { docker } = clients;
    const image = o.profile.image ?? defaults.image;
    const path = await imagePath(docker, image);
    await removeBuild(docker, o.buildId); // a leftover of this very build (a crash between create and record)
    const names = resourceNames(o.buildId, 'berth-build');
    const labels = buildLabels(o.environmentId, o.buildId, defaults.labels);
    try {
      if (o.profile.network !== 'none') await docker.createNetwork(networkSpec(names, labels));
      const container = await docker.createContainer(buildContainerSpec(o.profile, names, labels, o.binds, defaults.image));
      await container.start();
      return new BuildContainer(docker, clients.streams, o.buildId, container.id, image, path);
    } catch (error) {
      await removeBuild(docker, o.buildId).catch(() => undefined);
      throw new BerthError('unavailable', `The build container could not start: ${describeError(error)}`, { buildId: o.buildId, image });
    }
  }

  /** Runs one step to its end as UID 1000. A program the image lacks is reported as never run, with the image named. */
  async run(step: BuildStep): Promise<BuildStepExit> {
    if (this.removed) return { exitCode: null, error: 'the build container is gone' };
    let timedOut = false;
    const expire = () => {
      timedOut = true;
      this.remove().catch(() => undefined); // a failed removal is seen again by dispose
    };
    const timer = step.timeoutMs === undefined ? undefined : setTimeout(expire, step.timeoutMs);
    try {
      const exec = { user: COMMAND_USER, env: step.env, cwd: step.cwd };
      const probe = await runToEnd(this.docker.getContainer(this.id), { ...exec, cmd: ['/bin/sh', '-c', 'command -v "$1" >/dev/null', 'berth-probe', step.argv[0]] });
      if (timedOut) return { exitCode: null, timedOut };
      if (probe.exitCode !== 0) return { exitCode: null, error: `${step.argv[0]} is not installed in the image ${this.image}` };
      // Attached through the client without an idle timeout: an installer may be quiet for minutes.
      const exitCode = await runStreaming(this.streams.getContainer(this.id), { ...exec, cmd: step.argv }, step.onOutput);
      return timedOut ? { exitCode: null, timedOut } : { exitCode };
    } catch (error) {
      if (timedOut) return { exitCode: null, timedOut };
      return { exitCode: null, error: this.removed ? 'the build container was removed' : `Docker engine: ${describeError(error)}` };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Removes the container and its network (idempotent); what runs in it is killed. */
  remove(): Promise<void> {
    this.removed ??= removeBuild(this.docker, this.buildId);
    return this.removed;
  }
}

/** Removes every container and network carrying the build's label; absent ones are fine. */
export async function removeBuild(docker: Docker, buildId: string): Promise<void> {
  const filters = ownedBy(LABEL.buildId, buildId);
  for (const c of await docker.listContainers({ all: true, filters })) await ignoreMissing(docker.getContainer(c.Id).remove({ force: true }));
  for (const n of await docker.listNetworks({ filters })) await ignoreMissing(docker.getNetwork(n.Id).remove());
}

async function imagePath(docker: Docker, image: string): Promise<string> {
  let info: Docker.ImageInspectInfo;
  try {
    info = await docker.getImage(image).inspect();
  } catch (error) {
    if (engineStatus(error) !== 404) throw new BerthError('unavailable', `Docker engine: ${describeError(error)}`, { image });
    throw new BerthError('environment_invalid', `Image ${image} is not present on the Docker host (Berth never pulls).`, { image });
  }
  const entry = (info.Config?.Env ?? []).find((e) => e.startsWith('PATH='));
  // An image that sets none gets the engine's default, which is this one.
  return entry ? entry.slice('PATH='.length) : DEFAULT_PATH;
}
