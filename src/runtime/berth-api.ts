/**
 * The runtime API (src/runtime/runtime-api.ts) over one started BerthRuntime: environments and allocations,
 * sessions, executions, the read models, replay, the audit feed and metrics. Scope checks happen here: another
 * scope's resource is not found, never forbidden.
 */
import { randomUUID } from 'node:crypto';
import { BerthError, isBerthError } from '../../schemas/errors.ts';
import type { SessionContext } from '../machines/session.machine.ts';
import type { RetirementReport, RuntimeStatus } from '../../schemas/api.ts';
import type { ActivityItem } from '../projections/activity.projection.ts';
import type { ReadModel } from '../projections/read-model.ts';
import type { OutputStream } from '../../schemas/output.ts';
import type { ExecutionStatus } from '../../schemas/states.ts';
import type { EventPlace, RecordedEvent } from '../store/event-store.ts';
import type { BerthRuntime } from './core/berth-runtime.ts';
import { ContentService } from './builds/content-service.ts';
import { HarnessService } from './builds/harness-service.ts';
import { inScope } from './caller.ts';
import { EnvironmentService } from './environments/environment-service.ts';
import { ExecutionService } from './executions/execution-service.ts';
import { selectEnvironmentByProfile } from './executions/session-environment.ts';
import { registerReadModelGauges } from './core/metrics.ts';
import { defaultRolePolicy, isMember, type RolePolicy } from './role-policy.ts';
import type { DiskReserve } from './maintenance/disk-reserve.ts';
import type {
  AllocationView,
  Caller,
  CreateEnvironmentInput,
  EnvironmentView,
  ExecutionQuery,
  ExecutionRecord,
  OutputRead,
  OutputSeen,
  ProjectionStatus,
  ReplayStep,
  RuntimeApi,
  CreateSessionInput,
  SessionView,
  SubmitExecutionInput,
} from './runtime-api.ts';
import type { Listing, PageQuery } from './listing.ts';
import type { Services } from './services.ts';
import { replayStoredPages } from './core/stream-replay.ts';
import { timelinePage, type TimelinePage } from './core/stream-timeline.ts';
import { registeredMachine } from './core/machine-structure.ts';
import type { MachineStructure } from '../../schemas/console.ts';
import { ScanLanes } from './core/scan-lanes.ts';
import { ScopeIndex } from './core/scope-index.ts';
import type { Retention, RetentionReport } from './maintenance/retention.ts';
import type { PoolService } from './pools/pool-service.ts';
import type { PoolStatus } from './pools/pool-stats.ts';
import { LeaseService } from './leases/lease-service.ts';
import { CheckpointService } from './workspaces/checkpoint-service.ts';
import { TurnFileApi } from './workspaces/turn-file-api.ts';
import { TurnService, type TurnView } from './workspaces/turn-service.ts';
import { WorkspaceService, type HistoryEntry, type WorkspaceRecord } from './workspaces/workspace-service.ts';
import { splitRelativePath } from '../content/content-path.ts';

export interface BerthApiOptions {
  /** The environment new sessions select when they name none (seed 000: explicit null disables it). */
  defaultEnvironmentId?: string | null;
  /** Members' ceilings and quotas (role-policy.ts). Default: defaultRolePolicy. */
  policy?: RolePolicy;
  /** The retention policy's passes, when the admin turned retention on. */
  retentionPasses?: Retention;
  /** The admin's warm pools, when any is configured: acquires claim from them. */
  pools?: PoolService;
  /** The room kept for the event store on the data directory's filesystem; without it, none is kept. */
  diskReserve?: DiskReserve;
}

export class BerthApi implements RuntimeApi {
  readonly environments: EnvironmentService;
  readonly executions: ExecutionService;
  /** The Environments content chapter (seed 001), when services.content is there (the chapter is on). */
  readonly content?: ContentService;
  readonly workspaces: WorkspaceService;
  readonly turns: TurnService;
  readonly files: TurnFileApi;
  readonly checkpoints: CheckpointService;
  readonly leases: LeaseService;
  private readonly scopes: ScopeIndex;
  /** The audit feeds' turns at the store, one lane per scope. */
  private readonly scanLanes = new ScanLanes();

  constructor(
    private readonly runtime: BerthRuntime<Services>,
    private readonly services: Services,
    private readonly options: BerthApiOptions = {},
  ) {
    const now = services.now;
    const policy = options.policy ?? defaultRolePolicy;
    this.environments = new EnvironmentService({
      actors: runtime.actors,
      providers: services.providers,
      catalog: this.model('catalog'),
      allocations: this.model('active-allocations'),
      head: () => runtime.store.headPosition(),
      now,
      policy,
      ...(options.pools ? { pools: options.pools } : {}),
      ...(services.content ? { describeContent: (environments) => this.content!.describe(environments) } : {}),
    });
    if (services.content) {
      const harnesses = new HarnessService({ actors: runtime.actors, environments: this.environments, harnesses: this.model('harnesses'), now });
      this.content = new ContentService({
        actors: runtime.actors,
        environments: this.environments,
        harnesses,
        runtime: services.content,
        artifacts: services.artifacts,
        storageRoom: (caller, upcomingBytes) => this.assertStorageRoom(caller, 0, upcomingBytes),
        catalog: this.model('catalog'),
        policy,
        now,
      });
    }
    this.executions = new ExecutionService({
      actors: runtime.actors,
      environments: this.environments,
      services,
      artifacts: services.artifacts,
      activity: this.model('activity'),
      head: () => runtime.store.headPosition(),
      now,
      policy,
    });
    this.workspaces = new WorkspaceService({
      actors: runtime.actors,
      store: runtime.store,
      directories: services.workspaces.directories,
      workspaces: this.model('workspaces'),
      now,
      policy,
    });
    this.turns = new TurnService({
      actors: runtime.actors,
      workspaces: this.workspaces,
      directories: services.workspaces.directories,
      artifacts: services.artifacts,
      session: (caller, id) => this.sessionContext(caller, id),
      execution: (caller, id, waitMs) => this.executions.get(caller, id, waitMs).catch((e) => (isBerthError(e, 'not_found') ? undefined : Promise.reject(e))),
      settled: (id) => this.executions.whenSettled(id, services.shutdown),
      storageRoom: (caller) => this.assertStorageRoom(caller, 0),
      now,
    });
    this.files = new TurnFileApi(this.turns);
    this.checkpoints = new CheckpointService({ store: runtime.store, workspaces: this.workspaces, turns: this.turns, mounts: services.mounts });
    this.leases = new LeaseService({
      actors: runtime.actors,
      environments: this.environments,
      leases: this.model('leases'),
      policy,
      workspace: (caller, id) => this.workspaces.context(caller, id),
      turnHeld: async (id) => (await this.workspaces.get({ scope: '*', role: 'admin' }, id).catch(() => undefined))?.holder != null,
      createSession: (caller, input) => this.createSession(caller, input),
      metrics: runtime.metrics,
      now,
    });
    services.leases = this.leases;
    registerReadModelGauges(runtime, { allocations: this.model('active-allocations'), activity: this.model('activity'), leases: this.model('leases') });
    this.scopes = new ScopeIndex(runtime.actors);
  }

  capabilities(): Record<string, boolean> {
    return { environments: this.content !== undefined, executions: true, sessions: true, workspaces: true, turns: true, checkpoints: true, leases: true, websocket: true, sse: true, providers: true };
  }

  createEnvironment(caller: Caller, input: CreateEnvironmentInput): Promise<EnvironmentView> {
    return this.environments.create(caller, input);
  }
  listEnvironments(caller: Caller, page?: PageQuery): Promise<Listing<EnvironmentView>> {
    return this.environments.list(caller, page);
  }
  resolveEnvironment(caller: Caller, ref: string): Promise<string> {
    return this.environments.resolve(caller, ref);
  }
  getEnvironment(caller: Caller, id: string): Promise<EnvironmentView> {
    return this.environments.get(caller, id);
  }
  updateEnvironment(caller: Caller, id: string, patch: Partial<CreateEnvironmentInput>): Promise<EnvironmentView> {
    return this.environments.update(caller, id, patch);
  }
  async deleteEnvironment(caller: Caller, id: string): Promise<void> {
    await this.environments.delete(caller, id);
    await this.content?.removeContent(id);
  }
  acquire(caller: Caller, environmentId: string): Promise<AllocationView> {
    return this.environments.acquire(caller, environmentId);
  }
  listAllocations(caller: Caller, environmentId: string, page?: PageQuery): Promise<Listing<AllocationView>> {
    return this.environments.listAllocations(caller, environmentId, page);
  }
  release(caller: Caller, environmentId: string, allocationId: string): Promise<AllocationView> {
    return this.environments.release(caller, environmentId, allocationId);
  }

  activeAllocations(caller: Caller, page?: PageQuery): Promise<Listing<AllocationView>> {
    return this.environments.activeAllocations(caller, page);
  }

  catalog(caller: Caller, page?: PageQuery): Promise<Listing<EnvironmentView>> {
    return this.environments.list(caller, page);
  }

  async createSession(caller: Caller, input: CreateSessionInput): Promise<SessionView> {
    if (input.environmentId) await this.environments.context(caller, input.environmentId);
    const parent = input.parentId ? await this.sessionContext(caller, input.parentId) : undefined;
    // A workspace is bound at its current generation; a later rebinding makes the session stale (refused).
    const workspace = input.workspaceId ? await this.workspaces.context(caller, input.workspaceId) : undefined;
    const cwd = input.cwd === undefined ? undefined : sessionCwd(input.cwd);
    if (cwd !== undefined && !workspace && !parent?.workspaceId) {
      throw new BerthError('invalid_request', 'A session cwd is relative to its workspace: name a workspace.', { reason: 'cwd_without_workspace' });
    }
    const id = `hses_${randomUUID().replace(/-/g, '')}`;
    const defaultEnvironmentId = this.options.defaultEnvironmentId;
    const workspaceId = input.workspaceId !== undefined ? input.workspaceId : (parent?.workspaceId ?? null);
    const selected = input.profile !== undefined ? await selectEnvironmentByProfile(this.environments, caller, { profile: input.profile, workspaceId, sessionId: id }) : undefined;
    await this.runtime.actors.send('session', id, {
      type: 'session.created',
      scope: caller.scope,
      ...(input.environmentId !== undefined ? { environmentId: input.environmentId } : {}),
      ...(selected ? { environmentId: selected.environmentId, environmentReuse: selected.reuse } : {}),
      ...(input.workspaceId !== undefined ? { workspaceId: input.workspaceId } : {}),
      ...(workspace ? { workspaceGeneration: workspace.generation } : {}),
      ...(cwd !== undefined ? { cwd } : {}),
      ...(defaultEnvironmentId !== undefined ? { defaultEnvironmentId } : {}),
      ...(parent
        ? {
            parent: {
              sessionId: parent.id,
              relation: input.relation ?? 'child',
              environmentId: parent.environmentId,
              workspaceId: parent.workspaceId,
              ...(parent.workspaceGeneration !== null ? { workspaceGeneration: parent.workspaceGeneration } : {}),
              cwd: parent.cwd,
            },
          }
        : {}),
      at: this.services.now(),
    });
    return this.getSession(caller, id);
  }

  async getSession(caller: Caller, id: string): Promise<SessionView> {
    const c = await this.sessionContext(caller, id);
    return {
      id,
      environmentId: c.environmentId,
      environmentReuse: c.environmentReuse ?? null,
      workspaceId: c.workspaceId,
      workspaceGeneration: c.workspaceGeneration,
      cwd: c.cwd,
      parentId: c.parent?.sessionId ?? null,
      relation: c.parent?.relation ?? null,
      createdAt: c.createdAt,
    };
  }

  async deleteSession(caller: Caller, id: string): Promise<void> {
    const c = await this.sessionContext(caller, id);
    await this.runtime.actors.send('session', id, { type: 'session.deleted', at: this.services.now() });
    // An environment selected by session reuse is the session's own: it goes with it (the delete waits out a command
    // that has just finished). One still running keeps it: the environment stays in the catalog, under its
    // `session-…` name, for its owner to delete.
    if (c.environmentReuse === 'session' && c.environmentId) {
      await this.environments.delete(caller, c.environmentId).catch((e: unknown) => {
        if (!isBerthError(e, 'environment_not_found') && !isBerthError(e, 'environment_busy')) throw e;
      });
    }
  }

  createWorkspace(caller: Caller, input: { name?: string }): Promise<WorkspaceRecord> {
    return this.workspaces.create(caller, input);
  }
  listWorkspaces(caller: Caller, page?: PageQuery): Promise<Listing<WorkspaceRecord>> {
    return this.workspaces.list(caller, page);
  }
  getWorkspace(caller: Caller, id: string): Promise<WorkspaceRecord> {
    return this.workspaces.get(caller, id);
  }
  deleteWorkspace(caller: Caller, id: string): Promise<void> {
    return this.workspaces.delete(caller, id);
  }
  workspaceHistory(caller: Caller, id: string, page?: PageQuery): Promise<Listing<HistoryEntry>> {
    return this.workspaces.history(caller, id, page);
  }
  clearWorkspaceHolder(caller: Caller, id: string): Promise<{ cleared: string | null }> {
    return this.turns.clear(caller, id);
  }
  openTurn(caller: Caller, sessionId: string, opts?: { key?: string; waitMs?: number }): Promise<TurnView> {
    return this.turns.open(caller, sessionId, opts);
  }
  getTurn(caller: Caller, sessionId: string, turnId: string): Promise<TurnView> {
    return this.turns.get(caller, sessionId, turnId);
  }
  releaseTurn(caller: Caller, sessionId: string, turnId: string, opts?: { waitMs?: number }): Promise<TurnView> {
    return this.turns.release(caller, sessionId, turnId, opts);
  }

  async submitExecution(caller: Caller, input: SubmitExecutionInput): Promise<ExecutionRecord> {
    let environmentId = input.environment;
    if (input.harness && environmentId === undefined) {
      if (!this.content) throw new BerthError('invalid_request', 'Harnesses are part of the environments content chapter, which is switched off.', {});
      environmentId = await this.content.harnessEnvironment(caller, input.harness);
    }
    if (input.lease !== undefined) {
      // The lease's machine (made or resumed if need be); its variables under the caller's; its session for a turn.
      const { lease, target } = await this.leases.acquire(caller, input.lease);
      environmentId = target.environmentId;
      input = { ...input, env: { ...(await this.leases.envOf(caller, input.lease)), ...input.env } };
      if (input.turn !== undefined) {
        if (!lease.sessionId) throw new BerthError('invalid_request', 'The lease has no workspace: a turn needs one.', { reason: 'lease_without_workspace' });
        input = { ...input, session: lease.sessionId };
      }
    }
    if (input.session) {
      const session = await this.sessionContext(caller, input.session);
      if (environmentId === undefined) environmentId = session.environmentId ?? undefined;
    }
    if (input.turn !== undefined && !input.session) throw new BerthError('invalid_request', 'A turn is named with its session.', { reason: 'turn_without_session' });
    if (!environmentId) {
      throw new BerthError('invalid_request', 'Name an environment, or a session that selects one.', {});
    }
    const environment = await this.environments.context(caller, environmentId);
    this.environments.assertRunnable(caller, environment.profile);
    const content = this.content;
    const versionOf = content && (() => content.versionForExecution(environment));
    if (input.turn === undefined) return this.executions.submit(caller, input, environmentId, versionOf);
    const [session, turn] = [input.session!, input.turn];
    if (this.services.providers.get(environment.profile.provider).workspaceView === 'none') {
      throw new BerthError('invalid_request', 'This environment\'s provider cannot show a workspace to its commands yet.', { reason: 'workspace_view_unsupported', provider: environment.profile.provider });
    }
    // Admitted into the turn (its before-manifest taken) before it is accepted: the turn waits for it from then on.
    const id = this.executions.idOf(caller, input.operationId);
    const admitted = await this.turns.admitExecution(caller, session, turn, id, input.cwd);
    const { cwd: _cwd, ...rest } = input;
    const record = await this.executions.submit(caller, rest, environmentId, versionOf, { workspaceId: admitted.workspaceId, turnId: turn, cwd: admitted.cwd });
    void this.turns.recordWhenSettled(turn, id).catch(() => undefined);
    return record;
  }
  getExecution(caller: Caller, id: string, waitMs?: number): Promise<ExecutionRecord> {
    return this.executions.get(caller, id, waitMs);
  }
  listExecutions(caller: Caller, query: ExecutionQuery & PageQuery = {}): Promise<Listing<ExecutionRecord>> {
    return this.executions.list(caller, query);
  }
  cancelExecution(caller: Caller, id: string): Promise<ExecutionRecord> {
    return this.executions.cancel(caller, id);
  }
  readOutput(caller: Caller, id: string, stream: OutputStream, cursor: number, maxBytes?: number, into?: Buffer): Promise<OutputRead> {
    return this.executions.readOutput(caller, id, stream, cursor, maxBytes, into);
  }
  waitForOutput(caller: Caller, id: string, timeoutMs: number, seen?: OutputSeen): Promise<void> {
    return this.executions.waitForOutput(caller, id, timeoutMs, seen);
  }
  writeStdin(caller: Caller, id: string, bytes: Buffer): Promise<void> {
    return this.executions.writeStdin(caller, id, bytes);
  }
  endStdin(caller: Caller, id: string): Promise<void> {
    return this.executions.endStdin(caller, id);
  }
  resize(caller: Caller, id: string, cols: number, rows: number): Promise<void> {
    return this.executions.resize(caller, id, cols, rows);
  }

  /** `maxAgeMs`: how old the look at the free space may be (a write under way looks each time). */
  async assertStorageRoom(caller: Caller, maxAgeMs?: number, upcomingBytes?: number): Promise<void> {
    if (isMember(caller)) await this.options.diskReserve?.assertRoom(maxAgeMs, upcomingBytes);
  }

  activity(caller: Caller, page?: PageQuery): Promise<Listing<ActivityItem>> {
    return this.executions.activity(caller, page ?? {});
  }

  async replay(caller: Caller, stream: string, at?: number): Promise<AsyncIterable<ReplayStep[]>> {
    if (!(await this.scopes.visible(caller, stream))) throw new BerthError('not_found', 'No such stream.', { stream });
    return (await replayStoredPages(this.runtime.store, stream, at === undefined ? {} : { at: BigInt(at) })).pages;
  }

  async timeline(caller: Caller, stream: string, page: { from: number; limit: number; failures: boolean }): Promise<TimelinePage> {
    if (!(await this.scopes.visible(caller, stream))) throw new BerthError('not_found', 'No such stream.', { stream });
    return timelinePage(this.runtime.store, stream, page);
  }

  machine(kind: string): MachineStructure {
    return registeredMachine(kind);
  }

  events(caller: Caller, fromPosition: bigint | 'start' | 'now', options: { untilHead?: boolean } = {}): AsyncIterable<RecordedEvent> & { close(): Promise<void> } {
    const store = this.runtime.store;
    const scopes = this.scopes;
    const lanes = this.scanLanes;
    // 'now' is the store's head when the reader starts, so the subscription opens once that is known.
    let sub: ReturnType<typeof store.subscribeToAll> | undefined;
    let closed = false;
    return {
      close: async () => {
        closed = true;
        await sub?.close();
      },
      async *[Symbol.asyncIterator]() {
        const head = fromPosition === 'now' ? await store.headPosition() : fromPosition;
        // untilHead: the feed ends with the newest event at the request (a listing, not a watch).
        const end = options.untilHead ? await store.headPosition() : undefined;
        if (closed || end === -1n) return;
        const skip = (at: EventPlace) => scopes.skips(caller, at.stream, at.revision);
        const pace = () => lanes.turn(caller.scope);
        sub = store.subscribeToAll({ fromPosition: head === -1n ? 'start' : head, filter: { skip }, pace, ...(end !== undefined ? { until: end } : {}) });
        for await (const e of sub) {
          scopes.learn(e);
          if (await scopes.visible(caller, e.stream)) yield e;
        }
      },
    };
  }

  /** Every scope's executions are aged: the admin's only. */
  async runRetention(caller: Caller): Promise<RetentionReport> {
    if (isMember(caller)) throw new BerthError('forbidden', 'Retention covers every scope: it needs an admin token.', { role: caller.role });
    const retention = this.options.retentionPasses;
    if (!retention) throw new BerthError('invalid_state', 'Retention is off: the admin sets BERTH_RETENTION_DAYS to turn it on.', { reason: 'retention_off' });
    return retention.run(this.services.now());
  }

  /** Pools serve every scope: the admin's only. */
  pools(caller: Caller): PoolStatus[] {
    if (isMember(caller)) throw new BerthError('forbidden', 'Warm pools serve every scope: they need an admin token.', { role: caller.role });
    return this.options.pools?.status() ?? [];
  }

  async drainPool(caller: Caller, name: string): Promise<{ drained: number }> {
    this.pools(caller);
    const pools = this.options.pools;
    if (!pools?.has(name)) throw new BerthError('not_found', 'No such warm pool.', { pool: name });
    return { drained: await pools.drain(name) };
  }

  /** Counts of every scope: the admin's only. */
  metrics(caller: Caller): Promise<string> {
    if (isMember(caller)) throw new BerthError('forbidden', 'Metrics cover every scope: they need an admin token.', { role: caller.role });
    return this.runtime.metrics.text();
  }

  async projections(caller: Caller): Promise<ProjectionStatus[]> {
    if (isMember(caller)) throw new BerthError('forbidden', 'Read models cover every scope: they need an admin token.', { role: caller.role });
    const engine = this.runtime.projections;
    const lag = await engine.lag();
    const failed = new Map(engine.failed.map((f) => [f.name, f]));
    return engine.models.map((m) => {
      const f = failed.get(m.name);
      return { name: m.name, position: m.position.toString(), lag: String(lag[m.name] ?? 0n), failed: f ? { position: f.position, message: f.message } : null };
    });
  }

  async rebuildProjection(caller: Caller, name: string): Promise<ProjectionStatus> {
    if (isMember(caller)) throw new BerthError('forbidden', 'Read models cover every scope: they need an admin token.', { role: caller.role });
    if (!this.runtime.projections.get(name)) throw new BerthError('not_found', 'No such read model.', { projection: name });
    await this.runtime.projections.rebuild(name).catch((e: unknown) => {
      throw new BerthError('projection_failed', `The rebuild of ${name} failed: ${(e as Error).message}`, { projection: name });
    });
    return (await this.projections(caller)).find((p) => p.name === name)!;
  }

  runtimes(caller: Caller): RuntimeStatus[] {
    if (isMember(caller)) throw new BerthError('forbidden', 'The runtimes sharing the store are the admin\'s to see.', { role: caller.role });
    return this.runtime.runtimes().map((r) => ({
      ...r,
      startedAt: new Date(r.startedAt).toISOString(),
      self: r.runtimeId === this.runtime.identity.runtimeId,
    }));
  }

  async retireRuntime(caller: Caller, runtimeId: string): Promise<RetirementReport> {
    if (isMember(caller)) throw new BerthError('forbidden', 'Retiring a runtime needs an admin token.', { role: caller.role });
    const { adopted, recovered, failed } = await this.runtime.retire(runtimeId);
    return { runtimeId, adopted, recovered, failed };
  }

  private async sessionContext(caller: Caller, id: string): Promise<SessionContext> {
    const view = await this.runtime.actors.get<SessionContext>('session', id).catch((e) => (isBerthError(e) ? undefined : Promise.reject(e)));
    if (!view || view.state === 'pristine' || view.state === 'deleted' || !inScope(caller, view.context.scope)) {
      throw new BerthError('not_found', 'No such session.', { sessionId: id });
    }
    return view.context;
  }

  private model(name: string): ReadModel {
    const m = this.runtime.projections.get(name);
    if (!m) throw new BerthError('internal', `read model ${name} is not registered`, {});
    return m;
  }
}

/** A session's cwd: a relative path inside its workspace (checked for spelling here, on disk when a turn opens). */
function sessionCwd(raw: string): string {
  const split = splitRelativePath(raw);
  if ('problem' in split) throw new BerthError('invalid_request', 'A session cwd is a relative path inside its workspace.', { cwd: raw, reason: split.problem });
  return split.segments.join('/');
}
