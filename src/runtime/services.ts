/**
 * What effect handlers are handed (`ctx.services`): the providers, the artifact store, the executor of each
 * allocation, the clock, and a shutdown signal so long-running effects (watching a command) stop with the runtime
 * instead of holding it open; recovery reattaches them.
 */
import type { ArtifactStore } from '../store/artifact-store.ts';
import type { AllocationContext } from '../machines/allocation.machine.ts';
import type { Executor } from '../providers/provider.ts';
import type { ContentRuntime } from './builds/content-runtime.ts';
import type { LiveReaders } from './executions/live-readers.ts';
import type { ProviderRegistry } from './provider-registry.ts';
import type { MountService } from './workspaces/mount-service.ts';
import type { WorkspaceHost } from './workspaces/workspace-host.ts';

export interface Services {
  providers: ProviderRegistry;
  artifacts: ArtifactStore;
  /** The executor for an allocation (cached; built from the allocation actor's recorded profile and identity). */
  executorFor(allocationId: string): Promise<Executor>;
  /** The allocation as its actor has it now (its profile, its uses); not_found when there is none. */
  allocation(allocationId: string): Promise<AllocationContext>;
  now(): number;
  shutdown: AbortSignal;
  /** Who follows which execution's spool live: a large save waits (briefly) for them to catch up. */
  liveReaders: LiveReaders;
  /** Where workspaces are on this host: a turn's shell command gets its view, a deleted managed one is removed. */
  workspaces: WorkspaceHost;
  /** Workspace views on allocations that keep them (issue 14): the mount and execution actors' effects use it. */
  mounts: MountService;
  /**
   * Leases (issue 15): the removal a released lease's effect runs. Set once the API is built; an effect that runs
   * before (recovery at start) leaves the lease releasing, and the maintenance loop finishes it.
   */
  leases?: { remove(scope: string, environmentId: string | null): Promise<void> };
  /** Environment content (seed 001): absent when the chapter is switched off. */
  content?: ContentRuntime;
}
