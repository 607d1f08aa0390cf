/**
 * Executions for callers: submit (idempotent per operationId within a scope), records, cancel, output by cursor,
 * stdin and resize. The execution id is derived from (scope, operationId), so a repeated submission lands on the
 * same stream: the same input returns the existing execution, a different one fails with operation_conflict.
 * Waiting (long polls, followers) wakes on the activity read model, which moves with every appended event: no
 * polling of the actor, and a waiter costs nothing between events.
 */
import { createHash } from 'node:crypto';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { ActorRuntime, ActorView } from '../../actors/actor-runtime.ts';
import { executionStatus, type ExecutionContext } from '../../machines/execution.machine.ts';
import type { MachineView } from '../../machines/machine-view.ts';
import { activityItem, type ActivityEntry, type ActivityItem, type ExecutionRow } from '../../projections/activity.projection.ts';
import type { Page } from '../../projections/projection.ts';
import { assertCommandEnv } from '../../providers/command-env.ts';
import type { OutputStream } from '../../../schemas/output.ts';
import type { ExecutionStatus } from '../../../schemas/states.ts';
import type { WorkspaceContext } from '../../machines/workspace.machine.ts';
import type { Executor } from '../../providers/provider.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import { inScope, listedScope } from '../caller.ts';
import { listingOf, pageRange, type Listing, type PageQuery } from '../listing.ts';
import type { EnvironmentService } from '../environments/environment-service.ts';
import { stepShown, waitForEntry, waitPastStep } from './lifecycle-wait.ts';
import { assertQuota, isMember, outputLimitOf, type RolePolicy } from '../role-policy.ts';
import { ScopeTally } from '../scope-tally.ts';
import type { Caller, ExecutionQuery, ExecutionRecord, OutputRead, OutputSeen, SubmitExecutionInput, Target } from '../runtime-api.ts';
import type { Services } from '../services.ts';
import { versionMount } from './version-exec.ts';

/** Lifecycle steps after which the record and its output no longer change. */
const SETTLED = new Set(['saved', 'released', 'closing', 'compacted']);
/** Steps before the submit: no spool to read or watch yet (from dispatch on it reads empty until the command writes). */
const UNSUBMITTED = new Set(['pristine', 'accepted']);
/** Steps before the command runs: nothing to write stdin to or resize yet. */
const NOT_STARTED = new Set(['pristine', 'accepted', 'dispatched']);
const READ_MAX = 4 * 1024 * 1024;
/** Executions whose saved (and, apart, spooled) output `readOutput` remembers (a follower reads a chunk at a time). */
const SAVED_OUTPUTS_KEPT = 256;
/** How long stdin and resize wait for a just-submitted execution to start. */
const START_WAIT_MS = 30_000;
/** How long an admission waits for the activity model to reach the log's head before counting with what it has. */
const ADMISSION_READ_WAIT_MS = 2_000;
/** Steps in which an execution's output is only in its spool (not drained yet): its size is asked of the executor. */
const SPOOLING = new Set(['dispatched', 'running', 'exited']);

export const executionIdOf = (scope: string, operationId: string): string =>
  `hexe_${createHash('sha256').update(`${scope}\0${operationId}`).digest('hex').slice(0, 32)}`;

/** What an execution's record says of the checkpoint of the view it wrote. */
const checkpointOf = (c: NonNullable<ExecutionContext['checkpoint']>): NonNullable<ExecutionRecord['checkpoint']> => ({
  outcome: c.outcome,
  ...(c.checkpointId ? { id: c.checkpointId } : {}),
  ...(c.revision ? { revision: c.revision } : {}),
});

const argvOf = (command: string[] | string): string[] => (typeof command === 'string' ? ['/bin/sh', '-c', command] : command);

/** Covers everything that decides what runs, so a reused operationId with another input is detected. */
export const inputDigestOf = (environmentId: string, input: SubmitExecutionInput): string =>
  `sha256:${createHash('sha256')
    .update(
      JSON.stringify({
        environmentId,
        command: argvOf(input.command),
        cwd: input.cwd ?? null,
        env: Object.entries(input.env ?? {}).sort(([a], [b]) => (a < b ? -1 : 1)),
        stdin: input.stdin ?? false,
        pty: input.pty ?? null,
        timeoutMs: input.timeoutMs ?? null,
        // Only when there is one: digests of executions outside turns stay what they were.
        ...(input.turn !== undefined ? { turn: input.turn } : {}),
      }),
    )
    .digest('hex')}`;

/** The workspace a turn's shell command runs in: recorded with its acceptance, resolved to a view at submit. */
export interface WorkspaceRef {
  workspaceId: string;
  turnId: string;
  /** Relative to the workspace root. */
  cwd: string;
  /** A view the allocation keeps (issue 14): the mount generation the execution pinned. */
  mountGeneration?: number;
}

export interface ExecutionServiceDeps {
  actors: ActorRuntime<Services>;
  environments: EnvironmentService;
  services: Services;
  artifacts: ArtifactStore;
  activity: ReadModel;
  /** The event log's head position: an admission counts from a model that has caught up with it. */
  head: () => Promise<bigint>;
  now: () => number;
  /** Members' quotas: concurrent executions, output per execution and per scope. */
  policy: RolePolicy;
}

export class ExecutionService {
  /** Member admissions per scope that passed the quota and whose acceptance the activity model has not folded yet. */
  private readonly admitting = new ScopeTally();
  /**
   * Where saved executions' output is (their scope and artifacts: recorded once, then never changed; retention
   * alone removes artifacts, and a read that finds one gone answers output_expired), the oldest first out, so that
   * reading it chunk by chunk does not load the actor for every chunk.
   */
  private readonly savedOutputs = new Map<string, { scope: string; artifacts: ExecutionContext['artifacts'] }>();
  /**
   * Where running executions' spooled output is (their scope and allocation: fixed from dispatch on), so that a
   * follower's next chunk is read without loading the actor first; see `readOutput`.
   */
  private readonly spooledOutputs = new Map<string, { scope: string; allocationId: string }>();

  constructor(private readonly deps: ExecutionServiceDeps) {}

  /** The execution id an operationId of the caller's scope names. */
  idOf(caller: Caller, operationId: string): string {
    return executionIdOf(caller.scope, operationId);
  }

  /**
   * `versionOf` names the content version the execution reads (or refuses it: environment_not_ready); `workspace`
   * the turn's workspace view it runs in (admitted into the turn already).
   */
  async submit(
    caller: Caller,
    input: SubmitExecutionInput,
    environmentId: string,
    versionOf?: () => Promise<number | undefined>,
    workspace?: WorkspaceRef,
  ): Promise<ExecutionRecord> {
    const command = argvOf(input.command);
    if (command.length === 0 || command[0] === '') throw new BerthError('invalid_request', 'The command is empty.', {});
    if (input.env) assertCommandEnv(input.env);
    const id = executionIdOf(caller.scope, input.operationId);
    const inputDigest = inputDigestOf(environmentId, input);
    const existing = await this.deps.actors.get<ExecutionContext>('execution', id);
    if (existing && existing.state !== 'pristine') {
      if (existing.context.inputDigest !== inputDigest) {
        throw new BerthError('operation_conflict', 'The operationId is taken by a different input.', { operationId: input.operationId });
      }
      return this.record(existing);
    }
    const admitted = await this.admit(caller);
    let acceptedAt: bigint | undefined;
    try {
      const sent = await this.accept(caller, input, environmentId, id, inputDigest, versionOf, workspace);
      acceptedAt = sent.position;
      return sent.record;
    } finally {
      admitted(acceptedAt);
    }
  }

  /**
   * A member's admission against its scope's quotas (admins pass): concurrent executions (accepted or running, plus
   * admissions under way) and the output its executions keep on disk. Answers the release of its place, given the
   * position of the acceptance (the place is held until the activity model counts it) or nothing if none was made.
   */
  private async admit(caller: Caller): Promise<(acceptedAt?: bigint) => void> {
    if (!isMember(caller)) return () => undefined;
    const { activity, policy } = this.deps;
    await activity.waitFor(await this.deps.head(), ADMISSION_READ_WAIT_MS);
    assertQuota(caller, 'scope_output_bytes', policy.quotas.scopeOutputBytes, await this.outputBytesOf(caller.scope));
    // From here to the count's increment nothing awaits: concurrent admissions of the scope see each other.
    const live = activity.query.live(caller.scope) as number;
    assertQuota(caller, 'concurrent_executions', policy.quotas.concurrentExecutions, live + this.admitting.of(caller.scope));
    this.admitting.take(caller.scope);
    const leave = () => this.admitting.give(caller.scope);
    return (acceptedAt) => {
      if (acceptedAt === undefined) return leave();
      void activity.waitFor(acceptedAt, 60_000).catch(() => false).finally(leave);
    };
  }

  /** Output bytes the scope's executions keep: drained sizes, and the spool sizes of those still writing. */
  private async outputBytesOf(scope: string): Promise<number> {
    let total = this.deps.activity.query.outputBytes(scope) as number;
    for (const x of this.deps.activity.query.unfinished(scope) as ActivityItem[]) {
      if (x.outputBytes === null && SPOOLING.has(x.step)) total += await this.spooledBytes(x);
    }
    return total;
  }

  private async spooledBytes(x: ActivityEntry): Promise<number> {
    try {
      const sizes = (await (await this.deps.services.executorFor(x.allocationId)).status(x.id)).sizes ?? {};
      return Object.values(sizes).reduce((sum, n) => sum + (n ?? 0), 0);
    } catch {
      return 0; // its allocation is gone: nothing of it is on this host any more
    }
  }

  /** Acquires the target and appends the acceptance with its dispatch (and the allocation use alongside). */
  private async accept(
    caller: Caller,
    input: SubmitExecutionInput,
    environmentId: string,
    id: string,
    inputDigest: string,
    versionOf?: () => Promise<number | undefined>,
    workspace?: WorkspaceRef,
  ): Promise<{ record: ExecutionRecord; position?: bigint }> {
    const command = argvOf(input.command);
    // Work on another runtime's environment is that runtime's to run (several runtimes on one store).
    await this.deps.actors.assertOwned('environment', environmentId);
    const active = await versionOf?.();
    if (!workspace) await this.providerAdmits(caller, environmentId, input.cwd, active);
    const target = input.target ? await this.currentTarget(caller, environmentId, input.target) : await this.acquire(caller, environmentId);
    // A Docker allocation binds its version when it is made: the execution reads (and its record names) that one.
    const version = await this.deps.environments.versionRead(target.allocationId, active);
    // A view the allocation keeps (a staging volume) is made or brought to the head and pinned before acceptance.
    if (workspace) workspace = await this.mountedView(workspace, target, id);
    // One group commit holds the acceptance, the dispatch and the allocation use: the submit effect that follows
    // only submits once the use is held (it takes it itself, or reports stale_target, when this one was refused). A
    // use left by an acceptance that never landed is given back by maintenance (release-orphaned-uses).
    const at = this.deps.now();
    const use = this.deps.actors
      .send('allocation', target.allocationId, { type: 'allocation.use_acquired', useId: id, kind: 'execution', at })
      .catch(() => undefined);
    const outputLimitBytes = outputLimitOf(caller, this.deps.policy);
    try {
      const accepted = {
        type: 'execution.accepted',
        operationId: input.operationId,
        inputDigest,
        environmentId,
        target,
        command,
        ...(input.cwd !== undefined ? { cwd: input.cwd } : {}),
        ...(input.session !== undefined ? { sessionId: input.session } : {}),
        ...(workspace ? { workspace } : {}),
        ...(input.env ? { env: input.env } : {}),
        stdin: input.stdin ?? false,
        ...(input.pty ? { pty: input.pty } : {}),
        ...(input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {}),
        ...(version !== undefined ? { version } : {}),
        ...(outputLimitBytes !== undefined ? { outputLimitBytes } : {}),
        scope: caller.scope,
        at,
      };
      const sent = await this.deps.actors.sendAll('execution', id, [accepted, { type: 'execution.dispatched', at }]);
      return { record: this.record(sent), position: sent.position };
    } catch (e) {
      // Raced with a submission of the same operationId: answer as if it came first.
      if (isBerthError(e, 'invalid_state') && e.detail.reason === 'already_accepted') return { record: await this.get(caller, id) };
      throw e;
    } finally {
      await use;
    }
  }

  private async mountedView(workspace: WorkspaceRef, target: Target, executionId: string): Promise<WorkspaceRef> {
    const { services } = this.deps;
    const { profile } = await services.allocation(target.allocationId);
    if (services.providers.get(profile.provider).workspaceView !== 'materialized') return workspace;
    const context = (await this.deps.actors.get<WorkspaceContext>('workspace', workspace.workspaceId))?.context;
    if (!context) throw new BerthError('workspace_unavailable', 'The workspace is gone.', { workspaceId: workspace.workspaceId, reason: 'deleted' });
    return { ...workspace, mountGeneration: await services.mounts.pin(context, target, executionId) };
  }

  async get(caller: Caller, id: string, waitMs = 0): Promise<ExecutionRecord> {
    const view = await this.view(caller, id);
    if (waitMs <= 0 || SETTLED.has(String(view.state))) return this.record(view);
    await waitForEntry(this.deps.activity, id, (x) => SETTLED.has(x.step), Date.now() + waitMs);
    return this.record(await this.view(caller, id));
  }

  /**
   * Resolves true once the execution settles (its record and output no longer change), false when `stop` aborts
   * first. For in-process follow-ups (a turn records a shell command's changes when it ends); no caller check.
   */
  whenSettled(id: string, stop: AbortSignal): Promise<boolean> {
    return waitForEntry(this.deps.activity, id, (x) => SETTLED.has(x.step), Number.MAX_SAFE_INTEGER, stop);
  }

  /** One page of the caller's execution records (by operationId: that one, or none), read from the activity rows. */
  async list(caller: Caller, query: ExecutionQuery & PageQuery): Promise<Listing<ExecutionRecord>> {
    const range = pageRange(query);
    const matches = (r: { environment: string; status: string }) =>
      (!query.environment || r.environment === query.environment) && (!query.status || r.status === query.status);
    if (query.operationId !== undefined) {
      const view = await this.deps.actors.get<ExecutionContext>('execution', executionIdOf(caller.scope, query.operationId));
      return { items: view && view.state !== 'pristine' ? [this.record(view)].filter(matches) : [] };
    }
    // Read your writes: the listing includes what was accepted before it was asked for.
    await this.deps.activity.waitFor(await this.deps.head(), ADMISSION_READ_WAIT_MS);
    const filter = { scope: listedScope(caller), environmentId: query.environment, status: query.status };
    const page = this.deps.activity.query.page(filter, range) as Page<ExecutionRow>;
    return listingOf(page, page.rows.map(recordOf));
  }

  /** One page of the caller's activity: every execution's status and failure, never its payloads. */
  async activity(caller: Caller, query: PageQuery): Promise<Listing<ActivityItem>> {
    const range = pageRange(query);
    const page = this.deps.activity.query.page({ scope: listedScope(caller) }, range) as Page<ExecutionRow>;
    return listingOf(page, page.rows.map(activityItem));
  }

  async cancel(caller: Caller, id: string): Promise<ExecutionRecord> {
    await this.view(caller, id);
    await this.requestCancel(id);
    return this.get(caller, id);
  }

  /** Records the cancel (`failure`: why the server stopped it); already finished or cancelling, it is done already. */
  private async requestCancel(id: string, failure?: { code: string; message: string }): Promise<void> {
    try {
      await this.deps.actors.send('execution', id, { type: 'execution.cancel_requested', ...(failure ? { failure } : {}), at: this.deps.now() });
    } catch (e) {
      if (!isBerthError(e, 'invalid_state')) throw e;
    }
  }

  /**
   * Stops every command of a member still live here (not an admin's, which are exempt, nor another runtime's, which
   * its own reserve watches), recording `failure` as why: the data directory fell under its reserve.
   */
  async stopMembersCommands(failure: { code: string; message: string }): Promise<void> {
    for (const row of this.deps.activity.query.liveAll() as ExecutionRow[]) {
      const view = await this.deps.actors.get<ExecutionContext>('execution', row.id);
      // A member's command carries its output quota; an admin's has none (outputLimitOf).
      if (!view || !this.deps.actors.owns(view) || view.context.outputLimitBytes === undefined || view.context.cancel !== 'none') continue;
      await this.requestCancel(row.id, failure);
    }
  }

  /** Bytes from `cursor`: from the saved artifact once saved, else live from the executor's spool. */
  async readOutput(caller: Caller, id: string, stream: OutputStream, cursor: number, maxBytes = READ_MAX, into?: Buffer): Promise<OutputRead> {
    if (!Number.isSafeInteger(cursor) || cursor < 0) throw new BerthError('invalid_request', 'A cursor is a byte offset: an integer >= 0.', { cursor });
    const max = Math.min(Math.max(1, maxBytes), READ_MAX);
    const known = this.savedOutputs.get(id);
    if (known && inScope(caller, known.scope)) return this.readSaved(id, known.artifacts, stream, cursor, max, into);
    const spooled = this.spooledOutputs.get(id);
    if (spooled && inScope(caller, spooled.scope)) {
      // Bytes in the spool before its end are the execution's output whatever its step (what is saved is that
      // prefix): they go out as read. An empty or closed read is decided by the record below (saved, released...).
      const chunk = await (await this.deps.services.executorFor(spooled.allocationId)).read(id, stream, cursor, max, into);
      this.deps.services.liveReaders.noteRead(id, stream, chunk.next);
      if (chunk.data.length > 0 && !chunk.closed) return { data: chunk.data, next: chunk.next, closed: false, complete: false };
    }
    const view = await this.view(caller, id);
    // Its spool and saved output are the owner's (each runtime keeps its own artifacts): read them there.
    await this.deps.actors.assertOwned('execution', id, view);
    const c = view.context;
    if (c.retention) throw outputExpired(id, c.retention);
    if (c.artifacts) this.rememberSaved(id, c.scope, c.artifacts);
    if (SETTLED.has(String(view.state)) || c.artifacts) return this.readSaved(id, c.artifacts, stream, cursor, max, into);
    // From dispatch on, the spool is read: the first bytes go out as they land, not once the start is recorded.
    if (UNSUBMITTED.has(String(view.state))) return { data: Buffer.alloc(0), next: cursor, closed: false, complete: false };
    const executor = await this.deps.services.executorFor(c.target.allocationId);
    const chunk = await executor.read(id, stream, cursor, max, into);
    this.deps.services.liveReaders.noteRead(id, stream, chunk.next);
    // Once its start is recorded: a reader that has bytes then also finds the record running, as before the shortcut.
    if (!NOT_STARTED.has(String(view.state))) remember(this.spooledOutputs, id, { scope: c.scope, allocationId: c.target.allocationId });
    return { data: chunk.data, next: chunk.next, closed: chunk.closed, complete: false };
  }

  /** A saved artifact gone from the store was aged out by retention (its stream may not be compacted yet). */
  private async readSaved(id: string, artifacts: ExecutionContext['artifacts'], stream: OutputStream, cursor: number, max: number, into?: Buffer): Promise<OutputRead> {
    const saved = artifacts?.[stream];
    if (!saved || cursor >= saved.size) return { data: Buffer.alloc(0), next: Math.max(cursor, saved?.size ?? 0), closed: true, complete: true };
    const data = await this.deps.artifacts.readRange(saved, cursor, max, into).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
      this.savedOutputs.delete(id);
      throw outputExpired(id, null);
    });
    const complete = cursor + data.length >= saved.size;
    return { data, next: cursor + data.length, closed: complete, complete };
  }

  /**
   * Resolves when new output or a new lifecycle step may be there, or after `timeoutMs`. With `seen`, exactly: when
   * a watched stream holds bytes past its cursor or has ended, or the lifecycle moves past the step the caller read.
   */
  async waitForOutput(caller: Caller, id: string, timeoutMs: number, seen?: OutputSeen): Promise<void> {
    // Before the actor: the model never shows a step the actor has not reached (see waitPastStep).
    const shown = seen && stepShown(this.deps.activity, id);
    const view = await this.view(caller, id);
    const step = String(view.state);
    if (SETTLED.has(step)) return;
    if (seen) {
      if (seen.step !== undefined && seen.step !== step) return; // it moved since the caller looked
      const stop = new AbortController();
      const waits: Promise<unknown>[] = [waitPastStep(this.deps.activity, id, shown, timeoutMs, stop.signal)];
      // Streams are watched from dispatch on (as readOutput reads them); an ended one is not (its receipt is there).
      if (!UNSUBMITTED.has(step) && Object.keys(seen.cursors).length > 0) {
        const executor = await this.deps.services.executorFor(view.context.target.allocationId);
        waits.push(executor.waitForChange(id, timeoutMs, seen.cursors));
      }
      await Promise.race(waits).finally(() => stop.abort());
      return;
    }
    // One wake on the next event the activity model folds (not a loop: a loop would outlive the race below, and
    // comparing steps with a lagging model returns at once, which made followers spin).
    const activity = this.deps.activity;
    const moved = activity.waitFor(activity.position + 1n, timeoutMs).catch(() => false);
    if (UNSUBMITTED.has(step)) return void (await moved);
    const executor = await this.deps.services.executorFor(view.context.target.allocationId);
    await Promise.race([moved, executor.waitForChange(id, timeoutMs)]);
  }

  async writeStdin(caller: Caller, id: string, bytes: Buffer): Promise<void> {
    await (await this.live(caller, id)).writeStdin(id, bytes);
  }

  async endStdin(caller: Caller, id: string): Promise<void> {
    await (await this.live(caller, id)).endStdin(id);
  }

  async resize(caller: Caller, id: string, cols: number, rows: number): Promise<void> {
    await (await this.live(caller, id)).resize(id, cols, rows);
  }

  /** The record of a view of the actor; `recordOf` gives the same from the activity row. */
  record(view: MachineView<ExecutionContext>): ExecutionRecord {
    const c = view.context;
    return {
      id: c.id,
      operationId: c.operationId,
      environment: c.environmentId,
      target: c.target,
      command: c.command,
      status: executionStatus(view),
      ...(c.exit ? { exitCode: c.exit.exitCode, signal: c.exit.signal, ...(c.exit.timedOut ? { timedOut: true } : {}) } : {}),
      ...(c.failure ? { failure: c.failure } : {}),
      ...(c.version !== undefined ? { version: c.version } : {}),
      ...(c.checkpoint ? { checkpoint: checkpointOf(c.checkpoint) } : {}),
      step: String(view.state),
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
    };
  }

  /**
   * The environment's provider judges the execution before anything is acquired or accepted (a contained command's
   * cwd must lie in what its sandbox shows): its refusal is the caller's 4xx, and nothing ran.
   */
  private async providerAdmits(caller: Caller, environmentId: string, cwd: string | undefined, version: number | undefined): Promise<void> {
    const { profile } = await this.deps.environments.context(caller, environmentId);
    const provider = this.deps.services.providers.get(profile.provider);
    if (!provider.admit) return;
    const mounts = version === undefined ? [] : [await versionMount(this.deps.services, environmentId, version)];
    await provider.admit({ ...(cwd !== undefined ? { cwd } : {}), mounts }, profile);
  }

  /** The environment's ready allocation (acquiring it when there is none) as the execution's target. */
  private async acquire(caller: Caller, environmentId: string): Promise<Target> {
    const allocation = await this.deps.environments.acquire(caller, environmentId);
    return { environmentId, allocationId: allocation.allocationId, generation: allocation.generation };
  }

  /** A target named by the caller must still be the environment's current, ready allocation: else stale_target. */
  private async currentTarget(caller: Caller, environmentId: string, target: Target): Promise<Target> {
    if (target.environmentId !== environmentId) {
      throw new BerthError('invalid_request', 'The target names another environment.', { environmentId, target });
    }
    const current = (await this.deps.environments.context(caller, environmentId)).acquisition;
    const allocation = current ? await this.deps.environments.allocationView(current.allocationId) : undefined;
    if (!current || current.allocationId !== target.allocationId || current.generation !== target.generation || allocation?.state !== 'ready') {
      throw new BerthError('stale_target', 'The allocation generation named is no longer current; acquire the environment again.', {
        target,
        current: current && allocation ? { allocationId: current.allocationId, generation: current.generation, state: allocation.state } : null,
      });
    }
    return { environmentId, allocationId: target.allocationId, generation: target.generation };
  }

  private rememberSaved(id: string, scope: string, artifacts: ExecutionContext['artifacts']): void {
    this.spooledOutputs.delete(id);
    remember(this.savedOutputs, id, { scope, artifacts });
  }

  private async view(caller: Caller, id: string): Promise<ActorView<ExecutionContext>> {
    const view = /^hexe_[0-9a-f]{32}$/.test(id) ? await this.deps.actors.get<ExecutionContext>('execution', id) : undefined;
    if (!view || view.state === 'pristine' || !inScope(caller, view.context.scope)) {
      throw new BerthError('not_found', 'No such execution.', { executionId: id });
    }
    return view;
  }

  /** The executor holding a running execution (stdin and resize only make sense while it runs). */
  private async live(caller: Caller, id: string): Promise<Executor> {
    let view = await this.view(caller, id);
    if (NOT_STARTED.has(String(view.state))) {
      await waitForEntry(this.deps.activity, id, (x) => !NOT_STARTED.has(x.step), Date.now() + START_WAIT_MS);
      view = await this.view(caller, id);
    }
    if (view.state !== 'running') {
      throw new BerthError('invalid_state', 'The execution is not running.', { executionId: id, state: view.state });
    }
    return this.deps.services.executorFor(view.context.target.allocationId);
  }
}

const outputExpired = (executionId: string, retention: ExecutionContext['retention']) =>
  new BerthError('output_expired', 'The output of this execution aged out under the retention policy; its record is kept.', {
    executionId,
    ...(retention ? { output: retention.output, at: retention.at } : {}),
  });

/** Adds `id` to a bounded map (the oldest first out). */
function remember<T>(map: Map<string, T>, id: string, value: T): void {
  if (map.has(id)) return;
  if (map.size >= SAVED_OUTPUTS_KEPT) map.delete(map.keys().next().value!);
  map.set(id, value);
}

/** The execution record the activity row holds: what `record` gives for the actor in the same state. */
const recordOf = (x: ExecutionRow): ExecutionRecord => ({
  id: x.id,
  operationId: x.operationId,
  environment: x.environmentId,
  target: x.target,
  command: x.command,
  status: x.status,
  ...(x.exited ? { exitCode: x.exitCode, signal: x.signal, ...(x.timedOut ? { timedOut: true } : {}) } : {}),
  ...(x.failure ? { failure: x.failure } : {}),
  ...(x.version !== undefined ? { version: x.version } : {}),
  step: x.step,
  createdAt: x.createdAt,
  updatedAt: x.updatedAt,
});
