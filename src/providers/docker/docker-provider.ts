/**
 * The managed Docker provider (DESIGN §6): one identity-labelled container per allocation, on its own bridge network,
 * with its own spool volume, its workspace view's staging volume at /workspace (workspace-volume.ts), and the
 * content version the intent names bound read-only at /env/<slug> (a running container cannot gain mounts, so an
 * allocation keeps its version and its view's volume for life). Every call finds its resources again
 * by the request-id label, so allocate is idempotent (adopts a running container, resumes a created one) and
 * inspect/deallocate need no memory of earlier calls. Builds of Docker Environments run in one-off containers of the
 * same hardening (build-container.ts).
 *
 * Inspection rules (the recorded incarnation, `<containerId>@<StartedAt>`, is the allocation's receipt):
 * - no container: `absent`. If the allocation was never acknowledged (no recorded incarnation) and a network or
 *   volume of the request remains, `pending` (creation stopped half-way; allocate resumes it). Once acknowledged,
 *   leftovers never turn a lost container into `pending`: inspect ignores them (it never mutates) and deallocate
 *   removes them.
 * - created, never started: `pending` (allocate starts it).
 * - running with the recorded incarnation, or running and nothing recorded yet: `ready`.
 * - started again behind Berth's back (another StartedAt), exited, paused, restarting, dead: `fenced`. An exited
 *   container of ours was stopped or killed by someone else; Berth never restarts an allocation that may have uses.
 * - engine unreachable or timing out: `unknown`, never absent.
 * An allocate whose opening ping gets no answer (nothing listens, or the engine hangs) sends nothing and throws
 * `provider_unavailable` within the ping timeout, instead of waiting out each call's idle timeout.
 */
import { mkdir, rm } from 'node:fs/promises';
import type Docker from 'dockerode';
import { BerthError } from '../../../schemas/errors.ts';
import { isPoolId } from '../../../schemas/ids.ts';
import type { Profile } from '../../../schemas/profile.ts';
import { crashAt } from '../crash-point.ts';
import type { FileHost } from '../file-host.ts';
import type { Admission, AllocationIntent, AllocationRef, AllocationReport, Executor, PoolingCapability, Provider } from '../provider.ts';
import { workspaceCwd } from '../workspace-view.ts';
import { BuildContainer, removeBuild, type BuildContainerOptions } from './build-container.ts';
import { COMMAND_UID, containerSpec, DEFAULT_IMAGE, networkSpec, SPOOL_PATH, volumeSpec } from './container-spec.ts';
import {
  createDockerClient,
  describeError,
  type DockerEndpoint,
  endpointFromEnv,
  engineStatus,
  ignoreMissing,
  isDefiniteRefusal,
} from './docker-client.ts';
import { identityOf, isServing } from './container-identity.ts';
import { DockerExecutor } from './docker-executor.ts';
import { dockerPooling } from './docker-pooling.ts';
import { allocationLabels, LABEL, type Labels, ownedBy, resourceNames } from './labels.ts';
import { contentBindDir, contentVolumeMount, contentVolumeSpec } from './pool-content.ts';
import { prepareSpool } from './spool-volume.ts';
import { versionedInContainer } from './versioned-command.ts';
import { ensureWorkspaceVolume, workspaceFileHost } from './workspace-volume.ts';

export interface DockerProviderOptions {
  /** Default: DOCKER_HOST etc., as the docker CLI reads them. */
  endpoint?: DockerEndpoint;
  /** Image for profiles that name none. */
  defaultImage?: string;
  /** Added to everything created (tests put a unique one on their resources). */
  extraLabels?: Labels;
  /** Idle timeout of each engine call (ms). */
  timeoutMs?: number;
  /** How long the engine has to answer a ping (availability, and before an allocate sends anything). */
  pingTimeoutMs?: number;
  /** How executors reach the spool: `auto` (the volume's mountpoint when writable, else exec) or always `exec`. */
  spoolAccess?: 'auto' | 'exec';
  /**
   * A directory on the content versions' filesystem (Berth's data directory) where pool members' content volumes
   * live, so a claim hard-links the version in (pool-content.ts); absent: the engine's own volumes, filled by copy.
   */
  contentDir?: string;
}

/** Docker's StartedAt for a container that never ran. */
const NEVER_STARTED = '0001-01-01T00:00:00Z';

export class DockerProvider implements Provider {
  readonly kind = 'docker' as const;
  readonly ownership = 'managed' as const;
  readonly commandBase = 'image' as const;
  /** Shared per session (seed 000): a container is a fresh place. */
  readonly defaultReuse = 'session' as const;
  readonly contentBinding = 'allocation' as const;
  /** A running container cannot gain the workspace's bind: its view is the allocation's staging volume. */
  readonly workspaceView = 'materialized' as const;
  readonly versionedCommand = versionedInContainer;
  /** Build steps run as the command user, as executions do. */
  readonly buildUid = COMMAND_UID;
  readonly endpoint: DockerEndpoint;
  /** Warm pools: a running container takes another environment's limits in place (docker-pooling.ts). */
  readonly pooling: PoolingCapability;
  private readonly docker: Docker;
  private readonly streams: Docker;
  private readonly executors = new Map<string, DockerExecutor>();
  private readonly defaultImage: string;
  private readonly extraLabels: Labels;
  private readonly pingTimeoutMs: number;
  private readonly spoolAccess: 'auto' | 'exec';
  private readonly contentDir?: string;

  constructor(options: DockerProviderOptions = {}) {
    this.endpoint = options.endpoint ?? endpointFromEnv();
    this.docker = createDockerClient(this.endpoint, options.timeoutMs ?? 30_000);
    this.streams = createDockerClient(this.endpoint);
    this.defaultImage = options.defaultImage ?? DEFAULT_IMAGE;
    this.extraLabels = options.extraLabels ?? {};
    this.pingTimeoutMs = options.pingTimeoutMs ?? 1_000;
    this.spoolAccess = options.spoolAccess ?? 'auto';
    this.contentDir = options.contentDir;
    this.pooling = dockerPooling(this.docker, this.defaultImage, this.contentDir);
  }

  async available(): Promise<boolean> {
    try {
      // dockerode honours abortSignal on ping; its typings only know the callback form.
      const ping = this.docker.ping.bind(this.docker) as unknown as (o: { abortSignal: AbortSignal }) => Promise<unknown>;
      await ping({ abortSignal: AbortSignal.timeout(this.pingTimeoutMs) });
      return true;
    } catch {
      return false;
    }
  }

  async allocate(intent: AllocationIntent): Promise<AllocationReport> {
    if (!(await this.available())) {
      throw new BerthError('provider_unavailable', `The Docker engine at ${describeEndpoint(this.endpoint)} does not answer; nothing was sent.`, {
        provider: this.kind,
        requestId: intent.requestId,
      });
    }
    try {
      const found = await this.containersOf(LABEL.requestId, intent.requestId);
      if (found.length > 1) return ambiguous(intent.requestId, found.length);
      if (found.length === 1) return await this.bringUp(found[0].Id);
      return await this.create(intent);
    } catch (error) {
      if (error instanceof BerthError || !isDefiniteRefusal(error)) return this.uncertain(error);
      // The engine refused the configuration itself (bad limits, unusable image): retrying cannot help.
      await this.removeParts(intent.requestId, intent.allocationId).catch(() => undefined);
      throw new BerthError('environment_invalid', `Docker refused the allocation: ${describeError(error)}`, {
        requestId: intent.requestId,
        dockerStatus: engineStatus(error),
      });
    }
  }

  async inspect(ref: AllocationRef): Promise<AllocationReport> {
    try {
      const found = await this.containersOf(LABEL.requestId, ref.requestId);
      if (found.length > 1) return ambiguous(ref.requestId, found.length);
      const recorded = ref.identity?.incarnation;
      if (found.length === 0) {
        if (recorded) return { status: 'absent' };
        const parts = await this.partsOf(LABEL.requestId, ref.requestId);
        return parts.networks.length + parts.volumes.length > 0
          ? { status: 'pending', reason: 'network or volume created, container not yet created' }
          : { status: 'absent' };
      }
      const info = await this.docker.getContainer(found[0].Id).inspect();
      const identity = identityOf(info);
      // Being removed (docker rm -f under way): absent in a moment, so neither fenced nor ready yet.
      if (info.State.Status === 'removing') return { status: 'unknown', reason: `container ${info.Id} is being removed` };
      if (info.State.StartedAt === NEVER_STARTED) {
        return recorded
          ? { status: 'fenced', identity, reason: `container ${info.Id} is not the acknowledged incarnation ${recorded}` }
          : { status: 'pending', identity, reason: 'container created, never started' };
      }
      if (recorded && identity.incarnation !== recorded) {
        return {
          status: 'fenced',
          identity,
          reason: `incarnation changed behind Berth's back: ${identity.incarnation}, recorded ${recorded}`,
        };
      }
      if (isServing(info)) return { status: 'ready', identity };
      return { status: 'fenced', identity, reason: `container ${describeState(info)} behind Berth's back` };
    } catch (error) {
      return this.uncertain(error);
    }
  }

  async deallocate(ref: AllocationRef): Promise<'terminated' | 'unknown'> {
    try {
      await this.removeParts(ref.requestId, ref.allocationId);
      if (ref.identity) {
        void this.executors.get(ref.identity.resourceId)?.close();
        this.executors.delete(ref.identity.resourceId);
      }
      for (const [key, value] of [[LABEL.requestId, ref.requestId], [LABEL.allocationId, ref.allocationId]]) {
        const containers = await this.containersOf(key, value);
        const { networks, volumes } = await this.partsOf(key, value);
        if (containers.length + networks.length + volumes.length > 0) return 'unknown';
      }
      return 'terminated';
    } catch {
      return 'unknown';
    }
  }

  /** The allocation's staging volume, reached in its mountpoint on this host (workspace-volume.ts). */
  fileHost(ref: AllocationRef): Promise<FileHost> {
    return workspaceFileHost(this.docker, resourceNames(ref.requestId).workspace, ref);
  }

  /** A workspace execution takes its cwd from the view (relative under /workspace), never one of its own. */
  admit(admission: Admission): void {
    if (admission.workspace) workspaceCwd(admission.workspace, admission.cwd, 'materialized');
  }

  /** One executor per container, so terminals and stdin writers held by this runtime are found again. */
  executor(ref: AllocationRef, _profile: Profile): Executor {
    const containerId = ref.identity?.resourceId;
    const volume = ref.identity?.volume;
    if (!containerId || !volume) {
      throw new BerthError('invalid_state', 'The allocation has no container identity yet.', { requestId: ref.requestId });
    }
    let executor = this.executors.get(containerId);
    if (!executor) {
      executor = new DockerExecutor({ docker: this.docker, streams: this.streams, containerId, volume, spoolAccess: this.spoolAccess });
      this.executors.set(containerId, executor);
    }
    return executor;
  }

  /** Ends the executors' spare execs; commands keep running (their supervisors do not depend on this process). */
  async close(): Promise<void> {
    await Promise.all([...this.executors.values()].map((e) => e.close()));
  }

  /** Resolves once no executor is starting engine work ahead of need (benchmarks keep it out of what they time). */
  async settled(): Promise<void> {
    await Promise.all([...this.executors.values()].map((e) => e.settled()));
  }

  /** A one-off container for a build, from the profile's image with an allocation's hardening (build-container.ts). */
  startBuildContainer(o: BuildContainerOptions): Promise<BuildContainer> {
    return BuildContainer.start({ docker: this.docker, streams: this.streams }, o, { image: this.defaultImage, labels: this.extraLabels });
  }

  /** Removes what a build left on the engine (an interrupted build's container and network). */
  removeBuild(buildId: string): Promise<void> {
    return removeBuild(this.docker, buildId);
  }

  private async create(intent: AllocationIntent): Promise<AllocationReport> {
    const image = intent.profile.image ?? this.defaultImage;
    await this.requireImage(image);
    const names = resourceNames(intent.requestId);
    const labels = allocationLabels(intent, this.extraLabels);
    if (intent.profile.network !== 'none') await this.ensureNetwork(networkSpec(names, labels));
    await this.docker.createVolume(volumeSpec(names, labels));
    if (!(await ensureWorkspaceVolume(this.docker, names, labels, intent.profile))) {
      return { status: 'unknown', reason: `volume ${names.workspace} exists and is not this allocation's` };
    }
    // A pool's container learns its content version only when claimed: it gets a volume to show it in.
    const pooled = isPoolId(intent.environmentId);
    if (pooled) {
      const bindDir = this.contentDir && contentBindDir(this.contentDir, names);
      if (bindDir) await mkdir(bindDir, { recursive: true, mode: 0o755 });
      await this.docker.createVolume(contentVolumeSpec(names, labels, bindDir));
    }
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer(containerSpec(intent, names, labels, this.defaultImage, pooled ? [contentVolumeMount(names)] : []));
    } catch (error) {
      // The name is derived from the request id: a conflict means a racing allocate of this request created it.
      if (engineStatus(error) !== 409) throw error;
      const found = await this.containersOf(LABEL.requestId, intent.requestId);
      if (found.length !== 1) throw error;
      return this.bringUp(found[0].Id);
    }
    crashAt('docker.container-created'); // recovery tests: created, not started
    return this.startCreated(container, names.volume);
  }

  /** Adopts a running container, starts a created one, refuses anything else. */
  private async bringUp(id: string): Promise<AllocationReport> {
    const container = this.docker.getContainer(id);
    const info = await container.inspect();
    const volume = info.Mounts.find((m) => m.Destination === SPOOL_PATH)?.Name;
    if (info.State.StartedAt === NEVER_STARTED && info.State.Status === 'created' && volume) {
      return this.startCreated(container, volume);
    }
    return serving(info);
  }

  /** Lays out the spool (again, if resuming), starts, and reports what actually runs. */
  private async startCreated(container: Docker.Container, volume: string): Promise<AllocationReport> {
    await prepareSpool(this.docker, container, volume);
    try {
      await container.start();
    } catch (error) {
      if (engineStatus(error) !== 304) throw error; // 304: a racing allocate started it first
    }
    return serving(await container.inspect());
  }

  private async requireImage(image: string): Promise<void> {
    try {
      await this.docker.getImage(image).inspect();
    } catch (error) {
      if (engineStatus(error) !== 404) throw error;
      throw new BerthError('environment_invalid', `Image ${image} is not present on the Docker host (Berth never pulls).`, {
        image,
      });
    }
  }

  /** The spec asks the engine to refuse a duplicate name: 409 means a resumed or racing allocate made it already. */
  private async ensureNetwork(spec: Docker.NetworkCreateOptions): Promise<void> {
    try {
      await this.docker.createNetwork(spec);
    } catch (error) {
      if (engineStatus(error) !== 409) throw error;
    }
  }

  /** Removes every container, network and volume of the request or the allocation; absent ones are fine. */
  private async removeParts(requestId: string, allocationId: string): Promise<void> {
    const selectors: Array<[string, string]> = [[LABEL.requestId, requestId], [LABEL.allocationId, allocationId]];
    for (const [key, value] of selectors) {
      for (const c of await this.containersOf(key, value)) {
        await ignoreMissing(this.docker.getContainer(c.Id).remove({ force: true }));
      }
    }
    for (const [key, value] of selectors) {
      const { networks, volumes } = await this.partsOf(key, value);
      for (const n of networks) await ignoreMissing(this.docker.getNetwork(n.Id).remove());
      for (const v of volumes) await ignoreMissing(this.docker.getVolume(v.Name).remove());
    }
    // Named by the request: also the directory of a create that stopped before its volume was made.
    if (this.contentDir) await rm(contentBindDir(this.contentDir, resourceNames(requestId)), { recursive: true, force: true });
  }

  private containersOf(key: string, value: string): Promise<Docker.ContainerInfo[]> {
    return this.docker.listContainers({ all: true, filters: ownedBy(key, value) });
  }

  private async partsOf(key: string, value: string) {
    const filters = ownedBy(key, value);
    const [networks, volumes] = await Promise.all([
      this.docker.listNetworks({ filters }),
      this.docker.listVolumes({ filters }),
    ]);
    return { networks, volumes: volumes.Volumes ?? [] };
  }

  private uncertain(error: unknown): AllocationReport {
    if (error instanceof BerthError) throw error;
    return { status: 'unknown', reason: `Docker engine: ${describeError(error)}` };
  }
}

const describeEndpoint = (e: DockerEndpoint): string => ('socketPath' in e ? `unix://${e.socketPath}` : `tcp://${e.host}:${e.port ?? ''}`);

function serving(info: Docker.ContainerInspectInfo): AllocationReport {
  const identity = identityOf(info);
  if (isServing(info)) return { status: 'ready', identity };
  return { status: 'fenced', identity, reason: `container ${describeState(info)}; Berth does not restart it` };
}

function describeState(info: Docker.ContainerInspectInfo): string {
  const s = info.State;
  if (s.Status === 'exited') return `exited (code ${s.ExitCode}${s.OOMKilled ? ', out of memory' : ''})`;
  return s.Status;
}

const ambiguous = (requestId: string, count: number): AllocationReport => ({
  status: 'unknown',
  reason: `${count} containers carry request id ${requestId}`,
});
