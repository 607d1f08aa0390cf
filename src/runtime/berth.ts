/**
 * Composes one Berth: providers (native always; Docker when an engine is configured), the artifact store, the four
 * actor types, the read models and the maintenance tasks, started through BerthRuntime, with the runtime API on top.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ActorRuntime } from '../actors/actor-runtime.ts';
import type { ActorType } from '../actors/actor-type.ts';
import { DockerProvider } from '../providers/docker/docker-provider.ts';
import { poolContentDir } from '../providers/docker/pool-content.ts';
import { engineFiles } from '../providers/docker/docker-client.ts';
import { NativeProvider } from '../providers/native/native-provider.ts';
import { RemoteProvider } from '../providers/remote/remote-provider.ts';
import { sandboxIdentity } from '../providers/native/sandbox-identity.ts';
import type { Executor, Provider } from '../providers/provider.ts';
import type { AllocationContext } from '../machines/allocation.machine.ts';
import { ArtifactStore } from '../store/artifact-store.ts';
import { BerthError } from '../../schemas/errors.ts';
import { BerthApi, type BerthApiOptions } from './berth-api.ts';
import { BerthRuntime } from './core/berth-runtime.ts';
import { BerthMetrics } from './core/metrics-registry.ts';
import { resolveRemoteHosts, type Settings } from './config.ts';
import { maintenanceTasks, settleActiveAllocations } from './maintenance/maintenance-tasks.ts';
import { Retention, type RetentionSettings } from './maintenance/retention.ts';
import { ArtifactArchive } from '../store/artifact-archive.ts';
import { DataDirLock } from '../store/data-dir-lock.ts';
import { ProviderRegistry } from './provider-registry.ts';
import * as registry from './registry.ts';
import { stopBuilds, type ContentRuntime } from './builds/content-runtime.ts';
import { contentSettings, type ContentSettings } from './builds/content-settings.ts';
import type { BuildContext } from '../machines/build.machine.ts';
import type { EnvironmentContext } from '../machines/environment.machine.ts';
import { LiveReaders } from './executions/live-readers.ts';
import type { Services } from './services.ts';
import { WorkspaceDirectories } from './workspaces/workspace-directories.ts';
import { WorkspaceHost } from './workspaces/workspace-host.ts';
import { CheckpointPacks } from './workspaces/checkpoint-packs.ts';
import { DEFAULT_CAPTURE_LIMITS, MountService } from './workspaces/mount-service.ts';
import type { CaptureLimits } from '../providers/file-host.ts';
import { mappingsFromEnv, snapshotRoots, type RootMapping } from './workspaces/workspace-roots.ts';
import type { WorkspaceContext } from '../machines/workspace.machine.ts';
import type { PoolSettings } from './pools/pool-config.ts';
import type { PoolService } from './pools/pool-service.ts';
import { warmPools } from './pools/warm-pools.ts';
import { DiskReserve, storageFullBuild, storageFullFailure } from './maintenance/disk-reserve.ts';

export interface StartBerthOptions extends BerthApiOptions {
  settings: Pick<Settings, 'dataDir' | 'store' | 'maintenanceMs'>;
  runtimeId: string;
  logger?: Logger;
  /** Default: native, plus Docker when DOCKER_HOST is set or /var/run/docker.sock exists (BERTH_DOCKER=0 disables). */
  providers?: Provider[];
  /** Host paths contained commands must not see besides the data dir (the tokens file named by --tokens). */
  hiddenFromSandbox?: string[];
  /** The Environments content chapter (seed 001). Default: from BERTH_ENVIRONMENTS_CONTENT and friends (content-settings.ts). */
  content?: ContentSettings;
  /** Retention of finished executions' output (config.ts resolveRetention); absent: off. */
  retention?: RetentionSettings;
  /** Bounds of one workspace checkpoint (default DEFAULT_CAPTURE_LIMITS). */
  captureLimits?: CaptureLimits;
  /** The admin's directory workspaces `{scope, storageId, root}` (default: BERTH_WORKSPACE_ROOTS, workspace-roots.ts). */
  workspaceRoots?: RootMapping[];
  /** The clock events and retention read (ms since the epoch); tests age executions with their own. */
  now?: () => number;
  /** The admin's warm pools (pools/pool-config.ts resolvePools); absent: none. */
  warmPools?: PoolSettings[];
}

export interface Berth {
  runtime: BerthRuntime<Services>;
  api: BerthApi;
  services: Services;
  stop(): Promise<void>;
}

/** `hidden`: host paths contained commands must not see besides the data dir (the tokens file, also BERTH_TOKENS_FILE). */
export function defaultProviders(dataDir: string, env: NodeJS.ProcessEnv = process.env, hidden: string[] = [], logger?: Logger): Provider[] {
  const tokensFile = env.BERTH_TOKENS_FILE ? [env.BERTH_TOKENS_FILE] : [];
  const remoteHosts = resolveRemoteHosts(env);
  // The hosts' credentials are the control plane's secrets: no contained command sees their files.
  const credentials = remoteHosts.flatMap((h) => [h.credentialFile, h.clientKeyFile].filter((f): f is string => f !== undefined));
  // The engine is root on its host: its socket and TLS key are as secret as the tokens.
  const engine = env.BERTH_DOCKER !== '0' ? engineFiles(env) : [];
  const native = new NativeProvider({ dataDir, hidden: [...tokensFile, ...credentials, ...engine, ...hidden], identity: sandboxIdentity(env), ...(logger ? { logger } : {}) });
  const providers: Provider[] = [native];
  if (env.BERTH_DOCKER !== '0') providers.push(new DockerProvider({ contentDir: poolContentDir(dataDir) }));
  // Registered without hosts too: a profile naming one that is not configured is then refused by name.
  providers.push(new RemoteProvider(remoteHosts));
  return providers;
}

export async function startBerth(opts: StartBerthOptions): Promise<Berth> {
  const { dataDir } = opts.settings;
  // A bad mapping refuses the start before anything is opened (nothing half-configured).
  const mappings = opts.workspaceRoots ?? mappingsFromEnv();
  const mapped = snapshotRoots(mappings, dataDir);
  const lock = await DataDirLock.acquire(dataDir);
  const diskReserve = opts.diskReserve ?? (await DiskReserve.of(dataDir, opts.policy?.diskReserveMb));
  // The admin's workspace roots are host directories: a contained command sees only its own (bound at /workspace).
  const hidden = [...(opts.hiddenFromSandbox ?? []), ...mappings.map((m) => m.root)];
  const providers = new ProviderRegistry(opts.providers ?? defaultProviders(dataDir, process.env, hidden, opts.logger));
  const shutdown = new AbortController();
  let actors: ActorRuntime<Services> | undefined;
  const executors = new Map<string, Executor>();
  const allocation = async (allocationId: string): Promise<AllocationContext> => {
    const view = await actors?.get<AllocationContext>('allocation', allocationId);
    if (!view) throw new BerthError('not_found', 'No such allocation.', { allocationId });
    return view.context;
  };
  const directories = new WorkspaceDirectories(dataDir, mapped, mappings, providers.workspaceOwner());
  const metrics = new BerthMetrics();
  const workspace = async (id: string) => (await actors?.get<WorkspaceContext>('workspace', id))?.context;
  const mounts = new MountService({
    actors: () => actors!,
    providers,
    allocation,
    // Every capture, an admin's workspace's too: a checkpoint frees nothing, and its pack is written where the store is.
    packs: new CheckpointPacks(join(dataDir, 'checkpoints'), (upcomingBytes) => diskReserve.assertRoom(0, upcomingBytes)),
    directories,
    limits: opts.captureLimits ?? DEFAULT_CAPTURE_LIMITS,
    now: opts.now ?? (() => Date.now()),
    metrics,
  });
  const services: Services = {
    providers,
    mounts,
    workspaces: new WorkspaceHost(directories, workspace),
    artifacts: new ArtifactStore(join(dataDir, 'artifacts')),
    now: opts.now ?? (() => Date.now()),
    shutdown: shutdown.signal,
    liveReaders: new LiveReaders(),
    async executorFor(allocationId) {
      const cached = executors.get(allocationId);
      if (cached) return cached;
      const c = await allocation(allocationId);
      const executor = providers.get(c.profile.provider).executor(
        { requestId: c.requestId, allocationId, environmentId: c.environmentId, generation: c.generation, ...(c.identity ? { identity: c.identity } : {}) },
        c.profile,
      );
      executors.set(allocationId, executor);
      return executor;
    },
    allocation,
  };
  const content = opts.content ?? contentSettings();
  if (content.enabled) {
    const look = async <C>(type: string, id: string) => {
      const view = await actors?.get<C>(type, id);
      return view && view.state !== 'pristine' ? { state: String(view.state), context: view.context } : undefined;
    };
    const contentRuntime: ContentRuntime = {
      dataDir,
      settings: content,
      running: new Map(),
      ...(opts.logger ? { logger: opts.logger } : {}),
      environment: async (id) => (await look<EnvironmentContext>('environment', id))?.context,
      build: (id) => look<BuildContext>('build', id),
    };
    services.content = contentRuntime;
  }
  let runtime: BerthRuntime<Services> | undefined;
  let api: BerthApi | undefined;
  let pools: PoolService | undefined;
  const retention = opts.retention
    ? new Retention({
        actors: () => actors!,
        artifacts: services.artifacts,
        aged: (cutoff, limit) => (runtime!.projections.get('activity')!.query.finishedBefore(cutoff, limit) as { id: string }[]).map((x) => x.id),
        settings: opts.retention,
        ...(opts.retention.archiveDir ? { archive: new ArtifactArchive(opts.retention.archiveDir, [dataDir]) } : {}),
      })
    : undefined;
  try {
    runtime = await BerthRuntime.start<Services>({
      settings: opts.settings,
      runtimeId: opts.runtimeId,
      ...(opts.logger ? { logger: opts.logger } : {}),
      services,
      shutdown,
      metrics,
      actorTypes: registry.actorTypes as ActorType<any, Services>[],
      projections: registry.projections,
      onActors: (a) => {
        actors = a;
      },
      maintenanceTasks: [
        ...maintenanceTasks({ actors: () => actors!, projections: () => runtime!.projections, providers }),
        // Paused leases' timers, idle reclamation and unfinished releases (once the API that runs them exists).
        { name: 'lease-timers', run: async (now) => api?.leases.tick(now.getTime()) },
        ...(retention ? [retention.task()] : []),
      ],
    });
    try {
      // Recovery reconciles the active-allocation index before work is admitted.
      await settleActiveAllocations(runtime.actors, runtime.projections);
      pools = warmPools(runtime, services, opts.warmPools, opts.logger);
      api = new BerthApi(runtime, services, { ...opts, diskReserve, ...(retention ? { retentionPasses: retention } : {}), ...(pools ? { pools } : {}) });
      // Content left half done by a crash (imports, partial or interrupted versions, deleted environments) is
      // settled before work is admitted.
      await api.content?.recover();
      // The admin's mappings are recorded (a replaced root moves its workspace's generation on) before any turn.
      await api.workspaces.registerMapped();
      // Once recovery settled: a claim an environment had under way has landed, so no member is claimed twice.
      pools?.start();
      const running = api;
      diskReserve.watch(async (short) => {
        // Builds too, an admin's included: a build is no cleanup, and its installers write where the store does.
        if (services.content) stopBuilds(services.content, storageFullBuild(short));
        await running.executions.stopMembersCommands(storageFullFailure(short));
      });
    } catch (e) {
      await runtime.stop();
      throw e;
    }
  } catch (e) {
    await providers.close();
    await lock.release();
    throw e;
  }
  return {
    runtime,
    api,
    services,
    async stop() {
      diskReserve.stop();
      await pools?.stop();
      await runtime!.stop();
      await providers.close();
      await lock.release();
    },
  };
}
