/**
 * The runtime's public API: what the gateway, the CLI and embedders call. Every method takes the caller, whose scope
 * (tenant) bounds what it sees: a resource of another scope is `not_found` / `environment_not_found`, never forbidden.
 * Errors are BerthError with codes from schemas/errors.ts.
 */
import type { RetirementReport, RuntimeStatus } from '../../schemas/api.ts';
import type { OutputStream } from '../../schemas/output.ts';
import type { Ownership, Profile, ProviderKind } from '../../schemas/profile.ts';
import type { EnvironmentState, ExecutionStatus } from '../../schemas/states.ts';
import type { RecordedEvent } from '../store/event-store.ts';
import type { MachineStructure } from '../../schemas/console.ts';
import type { TimelinePage } from './core/stream-timeline.ts';
import type { Caller } from './caller.ts';
import type { RetentionReport } from './maintenance/retention.ts';
import type { PoolStatus } from './pools/pool-stats.ts';
import type { ContentApi } from './builds/content-api.ts';
import type { Listing, PageQuery } from './listing.ts';
import type { ActivityItem } from '../projections/activity.projection.ts';
import type { HistoryEntry, WorkspaceRecord } from './workspaces/workspace-service.ts';
import type { TurnView } from './workspaces/turn-service.ts';
import type { LeaseService } from './leases/lease-service.ts';
import type { CheckpointService } from './workspaces/checkpoint-service.ts';
import type { TurnFileApi } from './workspaces/turn-file-api.ts';

export type { Caller } from './caller.ts';
export type { WorkspaceRecord, HistoryEntry } from './workspaces/workspace-service.ts';
export type { TurnView } from './workspaces/turn-service.ts';
export type { TurnFileApi } from './workspaces/turn-file-api.ts';

export interface Target {
  environmentId: string;
  allocationId: string;
  generation: number;
}

/** The environment object of seed 001 §2 plus Berth's profile; content fields are filled once issue 6 lands. */
export interface EnvironmentView {
  id: string;
  object: 'environment';
  name: string;
  slug: string;
  description: string;
  entry: string;
  status: string;
  mount: string;
  version: number | null;
  latestVersion: number | null;
  profile: Profile;
  /** unavailable when the provider's backend (Docker daemon) cannot be reached. */
  availability: 'available' | 'unavailable';
  /** The allocation lifecycle (`status` is the content's, seed 001). */
  state: EnvironmentState;
  allocation: { allocationId: string; generation: number; state: string } | null;
  createdAt: number;
  updatedAt: number;
  [extra: string]: unknown;
}

export interface CreateEnvironmentInput {
  name: string;
  description?: string;
  entry?: string;
  profile?: Partial<Profile>;
}

export interface AllocationView {
  allocationId: string;
  environmentId: string;
  generation: number;
  state: string;
  provider: ProviderKind;
  ownership: Ownership;
  identity?: { resourceId: string; incarnation?: string };
  uses: { useId: string; kind: string }[];
  createdAt: number;
  updatedAt: number;
}

export interface SessionView {
  id: string;
  environmentId: string | null;
  /** The reuse policy that selected the environment from a profile (null when it was named or inherited). */
  environmentReuse: 'session' | 'workspace' | 'scope' | null;
  workspaceId: string | null;
  /** The workspace's binding generation the session is bound to (null without a workspace). */
  workspaceGeneration: number | null;
  /** Where its commands start, relative to the workspace root ('' the root). */
  cwd: string;
  parentId: string | null;
  /** How it came from its parent: a child (inherits, may diverge) or a fork. */
  relation: 'child' | 'fork' | null;
  createdAt: number;
}

export interface CreateSessionInput {
  environmentId?: string | null;
  /** Instead of environmentId: a profile whose reuse policy selects (or makes) the environment; nothing is allocated. */
  profile?: Partial<Profile>;
  workspaceId?: string | null;
  cwd?: string;
  parentId?: string;
  /** With parentId: `fork` copies the parent's selection as a fork (default `child`). */
  relation?: 'child' | 'fork';
}

export interface SubmitExecutionInput {
  operationId: string;
  environment?: string;
  session?: string;
  /** A harness whose environment is the default when `environment` is absent (seed 001 §5). */
  harness?: string;
  command: string[] | string;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: boolean;
  pty?: { cols: number; rows: number };
  timeoutMs?: number;
  /** The allocation the caller expects to run on; refused with stale_target unless it is still the current one. */
  target?: Target;
  /** A tool turn of `session`: the command runs in the workspace (cwd relative to the session's) and holds the turn. */
  turn?: string;
  /** A lease's key: the command runs on its machine (acquired if needed); with `turn`, in its session's workspace. */
  lease?: string;
}

/** DESIGN §8 execution record (fixed shape). */
export interface ExecutionRecord {
  id: string;
  operationId: string;
  environment: string;
  target: Target;
  command: string[];
  status: ExecutionStatus;
  exitCode?: number | null;
  signal?: string | null;
  /** Its timeoutMs passed and it was killed (the CLI exits 124). */
  timedOut?: boolean;
  failure?: { code: string; message: string };
  version?: number;
  /**
   * A command in a workspace view its allocation keeps (issue 14): whether the view's checkpoint published its
   * changes (`id`, the tree; `revision`, the head it made), went stale (a recapture saved the view) or failed.
   */
  checkpoint?: { outcome: 'published' | 'stale' | 'failed'; id?: string; revision?: number };
  /** The lifecycle step (accepted, dispatched, running, exited, drained, saved, released, closing). */
  step?: string;
  createdAt: number;
  updatedAt: number;
}

/** What a listing of executions filters by (an operationId names at most one). */
export interface ExecutionQuery {
  operationId?: string;
  environment?: string;
  status?: ExecutionStatus;
}

export interface OutputRead {
  data: Buffer;
  next: number;
  /** true once the stream has ended: no byte will ever follow `next` (it may not be saved yet). */
  closed: boolean;
  /** true once the stream is closed and saved. */
  complete: boolean;
}

/** What a follower has already seen of an execution: `waitForOutput` wakes as soon as there is more. */
export interface OutputSeen {
  /** The cursor of each stream still open; a stream left out is not watched. */
  cursors: Partial<Record<OutputStream, number>>;
  /** The lifecycle step of the last record it read (`ExecutionRecord.step`). */
  step?: string;
}

export interface ReplayStep {
  event: RecordedEvent;
  stateBefore: unknown;
  stateAfter: unknown;
  /** The context keys the event changed (null when no machine folds the stream). */
  contextDiff: Record<string, { before: unknown; after: unknown }> | null;
}

export interface RuntimeApi {
  capabilities(): Record<string, boolean>;
  /** The Environments content chapter (files, builds, versions, harnesses); absent when it is switched off. */
  readonly content?: ContentApi;

  createEnvironment(caller: Caller, input: CreateEnvironmentInput): Promise<EnvironmentView>;
  /** Every list takes a page query and returns one page and the cursor of the next (src/runtime/listing.ts). */
  listEnvironments(caller: Caller, page?: PageQuery): Promise<Listing<EnvironmentView>>;
  /**
   * The id an environment reference names: an id, or a name or slug of the caller's own scope (environment_not_found
   * otherwise, alike for another tenant's name and an unknown one). The gateway and the in-process CLI resolve here.
   */
  resolveEnvironment(caller: Caller, ref: string): Promise<string>;
  getEnvironment(caller: Caller, id: string): Promise<EnvironmentView>;
  updateEnvironment(caller: Caller, id: string, patch: Partial<CreateEnvironmentInput>): Promise<EnvironmentView>;
  deleteEnvironment(caller: Caller, id: string): Promise<void>;

  acquire(caller: Caller, environmentId: string): Promise<AllocationView>;
  listAllocations(caller: Caller, environmentId: string, page?: PageQuery): Promise<Listing<AllocationView>>;
  release(caller: Caller, environmentId: string, allocationId: string): Promise<AllocationView>;
  /** The active-allocation index. */
  activeAllocations(caller: Caller, page?: PageQuery): Promise<Listing<AllocationView>>;
  catalog(caller: Caller, page?: PageQuery): Promise<Listing<EnvironmentView>>;

  createSession(caller: Caller, input: CreateSessionInput): Promise<SessionView>;
  getSession(caller: Caller, id: string): Promise<SessionView>;
  deleteSession(caller: Caller, id: string): Promise<void>;

  /** Workspaces (issue 13): managed ones in the caller's scope, directory ones from the admin's mappings. */
  createWorkspace(caller: Caller, input: { name?: string }): Promise<WorkspaceRecord>;
  listWorkspaces(caller: Caller, page?: PageQuery): Promise<Listing<WorkspaceRecord>>;
  getWorkspace(caller: Caller, id: string): Promise<WorkspaceRecord>;
  deleteWorkspace(caller: Caller, id: string): Promise<void>;
  workspaceHistory(caller: Caller, id: string, page?: PageQuery): Promise<Listing<HistoryEntry>>;
  /** The admin's clear of a holder whose work is proven stopped; `invalid_state` names what blocks it. */
  clearWorkspaceHolder(caller: Caller, id: string): Promise<{ cleared: string | null }>;

  /** Tool turns: `key` makes opening idempotent; `waitMs` waits for a busy storage instead of workspace_busy. */
  openTurn(caller: Caller, sessionId: string, opts?: { key?: string; waitMs?: number }): Promise<TurnView>;
  getTurn(caller: Caller, sessionId: string, turnId: string): Promise<TurnView>;
  releaseTurn(caller: Caller, sessionId: string, turnId: string, opts?: { waitMs?: number }): Promise<TurnView>;
  /** The file tools of a turn (paths relative to the workspace root). */
  readonly files: TurnFileApi;
  /** Checkpoints, restore and the view of a workspace (issue 14). */
  readonly checkpoints: CheckpointService;
  /** Leases of work on machines (issue 15). */
  readonly leases: LeaseService;

  submitExecution(caller: Caller, input: SubmitExecutionInput): Promise<ExecutionRecord>;
  getExecution(caller: Caller, id: string, waitMs?: number): Promise<ExecutionRecord>;
  listExecutions(caller: Caller, query?: ExecutionQuery & PageQuery): Promise<Listing<ExecutionRecord>>;
  cancelExecution(caller: Caller, id: string): Promise<ExecutionRecord>;
  /**
   * Bytes of `stream` from `cursor`, at most `maxBytes`. With `into`, read into that buffer (at most its length) and
   * `data` is a view of it: a follower reuses its buffers instead of leaving one per read to the garbage collector.
   */
  readOutput(caller: Caller, id: string, stream: OutputStream, cursor: number, maxBytes?: number, into?: Buffer): Promise<OutputRead>;
  /**
   * Resolves when output or a status change may be available, or after timeoutMs. With `seen`, exactly: once a
   * watched stream holds bytes past its cursor, the stream ends, or the lifecycle moves past `seen.step`.
   */
  waitForOutput(caller: Caller, id: string, timeoutMs: number, seen?: OutputSeen): Promise<void>;
  writeStdin(caller: Caller, id: string, bytes: Buffer): Promise<void>;
  endStdin(caller: Caller, id: string): Promise<void>;
  resize(caller: Caller, id: string, cols: number, rows: number): Promise<void>;

  /** Throws `storage_full` for a member while the data directory is under the event store's reserve. */
  assertStorageRoom(caller: Caller): Promise<void>;
  /** Executions and operations with status and structured failure, never payloads. */
  activity(caller: Caller, page?: PageQuery): Promise<Listing<ActivityItem>>;
  /**
   * A stream's replay up to revision `at` (all of it by default), a page of steps at a time as they are taken: a
   * stream has no length bound, so the whole is never held. Another scope's stream is `not_found`, before any page.
   */
  replay(caller: Caller, stream: string, at?: number): Promise<AsyncIterable<ReplayStep[]>>;
  /** One page of a stream's replay (the web console's timeline); another scope's stream is `not_found`. */
  timeline(caller: Caller, stream: string, page: { from: number; limit: number; failures: boolean }): Promise<TimelinePage>;
  /** The structure of a registered actor type's machine (not tenant data: the same for every caller). */
  machine(kind: string): MachineStructure;
  /**
   * The audit feed of the caller's scope, from an exclusive global position ('now': only what comes next); with
   * `untilHead` it ends after the newest event at the call.
   */
  events(caller: Caller, fromPosition: bigint | 'start' | 'now', options?: { untilHead?: boolean }): AsyncIterable<RecordedEvent> & { close(): Promise<void> };
  /** Prometheus text over every scope; `forbidden` for members. */
  metrics(caller: Caller): Promise<string>;
  /** One retention pass now (the admin's; `invalid_state` when retention is off). */
  runRetention(caller: Caller): Promise<RetentionReport>;
  /** The warm pools and their state (the admin's; none when none is configured). */
  pools(caller: Caller): PoolStatus[];
  /** Releases a pool's ready allocations, which it makes again (the admin's; `not_found` for an unknown pool). */
  drainPool(caller: Caller, name: string): Promise<{ drained: number }>;
  /** Every read model: its position and lag, and why it failed if it did (the admin's). */
  projections(caller: Caller): Promise<ProjectionStatus[]>;
  /** Recomputes one read model from the first event, e.g. after a fix for the event it failed on (the admin's). */
  rebuildProjection(caller: Caller, name: string): Promise<ProjectionStatus>;
  /** The runtimes sharing the event store (the admin's). */
  runtimes(caller: Caller): RuntimeStatus[];
  /** Retires another runtime and adopts its unfinished actors here (the admin's; issue #17). */
  retireRuntime(caller: Caller, runtimeId: string): Promise<RetirementReport>;
}

export interface ProjectionStatus {
  name: string;
  /** Global position of the last event it reflects. */
  position: string;
  lag: string;
  /** Set when it failed: it answers `projection_failed` until rebuilt. */
  failed: { position: string; message: string } | null;
}
