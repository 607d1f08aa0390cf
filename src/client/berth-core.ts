/**
 * The typed client of a Berth gateway, resource by resource (berth-client.ts adds the sandboxes on top, and is what
 * callers import). `Berth.connect({url, token})`, then `environments.*` (with their content:
 * archive import, builds, versions), `workspaces.*`, `leases.*`, `sessions.*`, tool `turns.*` (with their file tools; `turns.with`
 * opens, runs and always releases one), `executions.*` and `events.follow`. `executions.run` submits with an operationId
 * (generated when absent), follows the output over the WebSocket and reconnects transparently from its cursors; a
 * submit whose answer was lost is retried with the same operationId, which returns the existing execution, never a
 * second run. Server errors are BerthApiError. Every list has `page(options)` (one page: its items and the `next`
 * cursor), `iterate(options)` (an async iterator over every page from there) and `list()`, which walks every page
 * and returns all the items in one array.
 */
import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type {
  RetirementReport,
  RuntimeStatus,
  allocationSchema,
  bindLeaseBody,
  checkpointDiffSchema,
  checkpointSchema,
  checkpointTreeSchema,
  clearedSchema,
  createEnvironmentBody,
  createSessionBody,
  createWorkspaceBody,
  environmentSchema,
  ExecutionRecordJson,
  historyEntrySchema,
  leaseSchema,
  leaseTargetSchema,
  mountSchema,
  replayStepSchema,
  restoredSchema,
  sessionSchema,
  submitExecutionBody,
  turnSchema,
  updateEnvironmentBody,
  workspaceSchema,
} from '../../schemas/api.ts';
import type { buildRecordSchema, importResultSchema, versionListSchema } from '../../schemas/content-api.ts';
import type { OutputStream } from '../../schemas/output.ts';
import type { ExecutionStatus } from '../../schemas/states.ts';
import { followEvents, followLeasePauses, type EventFeed, type Feed, type LeasePauseFrame } from './event-feed.ts';
import { followExecution, type FollowOptions } from './execution-follower.ts';
import { HttpTransport } from './http-transport.ts';
import { collect, everyItem, readPage, type PageOptions } from './pages.ts';
import type { BackoffOptions } from './reconnect-backoff.ts';
import { retrier, type Retry } from './retry.ts';
import { TurnFiles } from './turn-files.ts';

export type Environment = z.output<typeof environmentSchema>;
export type Allocation = z.output<typeof allocationSchema>;
export type Session = z.output<typeof sessionSchema>;
export type ReplayStepJson = z.output<typeof replayStepSchema>;
export type BuildRecord = z.output<typeof buildRecordSchema>;
export type VersionList = z.output<typeof versionListSchema>;
export type ImportResult = z.output<typeof importResultSchema>;
export type CreateEnvironment = z.input<typeof createEnvironmentBody>;
export type UpdateEnvironment = z.input<typeof updateEnvironmentBody>;
export type SubmitExecution = z.input<typeof submitExecutionBody>;
export type CreateSession = z.input<typeof createSessionBody>;
export type Workspace = z.output<typeof workspaceSchema>;
export type CreateWorkspace = z.input<typeof createWorkspaceBody>;
export type HistoryEntry = z.output<typeof historyEntrySchema>;
export type Cleared = z.output<typeof clearedSchema>;
export type Turn = z.output<typeof turnSchema>;
export type Checkpoint = z.output<typeof checkpointSchema>;
export type CheckpointTree = z.output<typeof checkpointTreeSchema>;
export type CheckpointDiff = z.output<typeof checkpointDiffSchema>;
export type Mount = z.output<typeof mountSchema>;
export type Restored = z.output<typeof restoredSchema>;
export type Lease = z.output<typeof leaseSchema>;
export type LeaseTarget = z.output<typeof leaseTargetSchema>;
export type BindLease = z.input<typeof bindLeaseBody>;
export type LeasePause = { cause: { kind: string; message?: string }; retryAt?: number };
export type LeaseQuery = { workKind?: string; workId?: string };
export type ProjectionState = { name: string; position: string; lag: string; failed: { position: string; message: string } | null };
/** Checkpoints are listed oldest first only. */
export type CheckpointPageOptions = Omit<PageOptions, 'order'>;

/** Where a command runs: an environment (id), a session or a lease's machine, in one of its tool turns when `turn` is given. */
export type RunWhere = string | { session: string; turn?: string } | { lease: string; turn?: string };

/** An open turn inside `turns.with`: its record, its file tools, a `run` of shell commands, checkpoints and restores. */
export interface OpenTurn {
  turn: Turn;
  files: TurnFiles;
  run(command: string[] | string, options?: RunOptions): Promise<ExecutionRecordJson>;
  /** Publishes a checkpoint of the workspace (`stale_version` when its head moved meanwhile). */
  checkpoint(): Promise<Checkpoint>;
  /** Gives the workspace one of its checkpoints' tree (`stale_version` when the head is not `expectedRevision`). */
  restore(checkpointId: string, options?: RestoreOptions): Promise<Restored>;
}

export interface RestoreOptions {
  /** The head revision the restore builds on; another head refuses it and nothing is restored. */
  expectedRevision?: number;
}

export interface WithTurnOptions {
  /** An idempotency key for opening. */
  key?: string;
  /** Wait this long for a busy storage instead of failing with workspace_busy. */
  waitMs?: number;
  /** How long the release waits for calls and commands of the turn still running (server default: 30 s). */
  releaseWaitMs?: number;
}

export interface RunOptions extends Omit<FollowOptions, 'cursors' | 'onStatus'> {
  operationId?: string;
  pty?: { cols: number; rows: number };
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
  onStatus?: FollowOptions['onStatus'];
  /** Called once the execution is accepted, with its record (its id in particular). */
  onSubmitted?: (record: ExecutionRecordJson) => void;
}

export type ExecutionQuery = { operationId?: string; environment?: string; status?: ExecutionStatus };

export interface ConnectOptions {
  url: string;
  token: string;
  backoff?: BackoffOptions;
}

const path = (...parts: string[]) => parts.map(encodeURIComponent).join('/');

export class BerthCore {
  protected constructor(
    private readonly http: HttpTransport,
    protected readonly backoff: BackoffOptions | undefined,
    readonly capabilities: Record<string, boolean>,
  ) {
    this.retry = retrier(backoff);
  }

  /** Runs an idempotent request again on transient faults (network, 5xx), with this client's backoff. */
  readonly retry: Retry;

  /** Connects and checks the token (GET /v1/capabilities). */
  static async connect(options: ConnectOptions): Promise<BerthCore> {
    return new BerthCore(...(await BerthCore.open(options)));
  }

  /** The transport, backoff and capabilities a client is made of, once the token is checked. */
  protected static async open(options: ConnectOptions): Promise<[HttpTransport, BackoffOptions | undefined, Record<string, boolean>]> {
    const http = new HttpTransport(options.url, options.token);
    const { capabilities } = await http.json<{ capabilities: Record<string, boolean> }>('GET', '/v1/capabilities');
    return [http, options.backoff, capabilities];
  }

  readonly environments = {
    create: (input: CreateEnvironment) => this.http.json<Environment>('POST', '/v1/environments', { body: input }),
    /** Every environment of the caller's scope (every page). */
    list: () => collect(this.environments.iterate()),
    page: (options: PageOptions = {}) => readPage<Environment>(this.http, '/v1/environments', { ...options }),
    iterate: (options: PageOptions = {}) => everyItem((cursor) => this.environments.page({ ...options, cursor }), options.cursor),
    get: (id: string) => this.http.json<Environment>('GET', `/v1/environments/${path(id)}`),
    update: (id: string, patch: UpdateEnvironment) =>
      this.http.json<Environment>('PUT', `/v1/environments/${path(id)}`, { body: patch }),
    delete: (id: string) => this.http.json<void>('DELETE', `/v1/environments/${path(id)}`),
    acquire: (id: string) => this.http.json<Allocation>('POST', `/v1/environments/${path(id)}/allocations`),
    /** Every allocation alive of the environment (every page). */
    allocations: (id: string) => collect(this.environments.iterateAllocations(id)),
    allocationsPage: (id: string, options: PageOptions = {}) =>
      readPage<Allocation>(this.http, `/v1/environments/${path(id)}/allocations`, { ...options }),
    iterateAllocations: (id: string, options: PageOptions = {}) =>
      everyItem((cursor) => this.environments.allocationsPage(id, { ...options, cursor }), options.cursor),
    release: (id: string, allocationId: string) =>
      this.http.json<Allocation>('DELETE', `/v1/environments/${path(id, 'allocations', allocationId)}`),
    /** Imports a tar stream into the environment's source as it is produced (`replace` clears the source first). */
    importArchive: (id: string, tar: AsyncIterable<Uint8Array>, options: { replace?: boolean } = {}) =>
      this.http.json<ImportResult>('POST', `/v1/environments/${path(id, 'import')}`, {
        query: { replace: options.replace ? 'true' : undefined },
        bytes: { stream: tar, contentType: 'application/x-tar' },
      }),
    /** Starts the next version's build; answers at once with its record (status `building`). */
    build: (id: string) => this.http.json<BuildRecord>('POST', `/v1/environments/${path(id, 'build')}`),
    getBuild: (id: string, version: number) => this.http.json<BuildRecord>('GET', `/v1/environments/${path(id, 'builds', String(version))}`),
    versions: (id: string) => this.http.json<VersionList>('GET', `/v1/environments/${path(id, 'versions')}`),
    activate: (id: string, version: number) =>
      this.http.json<VersionList>('POST', `/v1/environments/${path(id, 'versions', String(version), 'activate')}`),
  };

  readonly allocations = {
    /** The active-allocation index of the caller's scope (every page). */
    active: () => collect(this.allocations.iterate()),
    page: (options: PageOptions = {}) => readPage<Allocation>(this.http, '/v1/allocations', { ...options }),
    iterate: (options: PageOptions = {}) => everyItem((cursor) => this.allocations.page({ ...options, cursor }), options.cursor),
  };

  readonly sessions = {
    /** A session: an environment and/or a workspace (bound at its current generation, commands starting in `cwd`). */
    create: (input: CreateSession) => this.http.json<Session>('POST', '/v1/sessions', { body: input }),
    get: (id: string) => this.http.json<Session>('GET', `/v1/sessions/${path(id)}`),
    /** No new turn or command runs in it afterwards; its executions and turns keep their records. */
    delete: (id: string) => this.http.json<void>('DELETE', `/v1/sessions/${path(id)}`),
  };

  readonly workspaces = {
    /** A managed workspace: a directory the server makes and owns, in the caller's scope. */
    create: (input: CreateWorkspace = {}) => this.http.json<Workspace>('POST', '/v1/workspaces', { body: input }),
    /** Every workspace of the caller's scope (every page). */
    list: () => collect(this.workspaces.iterate()),
    page: (options: PageOptions = {}) => readPage<Workspace>(this.http, '/v1/workspaces', { ...options }),
    iterate: (options: PageOptions = {}) => everyItem((cursor) => this.workspaces.page({ ...options, cursor }), options.cursor),
    get: (id: string) => this.http.json<Workspace>('GET', `/v1/workspaces/${path(id)}`),
    /** Deletes a managed workspace and its directory (workspace_busy while a turn holds it). */
    delete: (id: string) => this.http.json<void>('DELETE', `/v1/workspaces/${path(id)}`),
    /** The whole file history: each tool mutation and each shell command's changes (every page). */
    history: (id: string) => collect(this.workspaces.iterateHistory(id)),
    historyPage: (id: string, options: PageOptions = {}) => readPage<HistoryEntry>(this.http, `/v1/workspaces/${path(id, 'history')}`, { ...options }),
    iterateHistory: (id: string, options: PageOptions = {}) =>
      everyItem((cursor) => this.workspaces.historyPage(id, { ...options, cursor }), options.cursor),
    /** Admin: clears the storage's holder, only when its work is proven stopped (else invalid_state, detail.blocking). */
    clearHolder: (id: string) => this.http.json<Cleared>('POST', `/v1/workspaces/${path(id, 'holder', 'clear')}`),
    /** Every published checkpoint of the workspace, oldest first (every page). */
    checkpoints: (id: string) => collect(this.workspaces.iterateCheckpoints(id)),
    /** One page; it may hold fewer than `limit` checkpoints (even none) and still have a `next`. */
    checkpointsPage: (id: string, options: CheckpointPageOptions = {}) =>
      readPage<Checkpoint>(this.http, `/v1/workspaces/${path(id, 'checkpoints')}`, { ...options }),
    iterateCheckpoints: (id: string, options: CheckpointPageOptions = {}) =>
      everyItem((cursor) => this.workspaces.checkpointsPage(id, { ...options, cursor }), options.cursor),
    /** One checkpoint with its tree (`truncated` past the server's limit of entries). */
    checkpoint: (id: string, checkpointId: string) => this.http.json<CheckpointTree>('GET', `/v1/workspaces/${path(id, 'checkpoints', checkpointId)}`),
    /** What changed from checkpoint `from` to checkpoint `to`. */
    diff: (id: string, from: string, to: string) => this.http.json<CheckpointDiff>('GET', `/v1/workspaces/${path(id, 'diff')}`, { query: { from, to } }),
    /** The workspace's view (`state: 'unbound'` when it never had one). */
    mount: (id: string) => this.http.json<Mount>('GET', `/v1/workspaces/${path(id, 'mount')}`),
    /** Saves the view and lets it go (its allocation stays). */
    detach: (id: string) => this.http.json<Mount>('POST', `/v1/workspaces/${path(id, 'detach')}`),
  };

  readonly turns = {
    /** Opens a tool turn on the session's workspace: it holds the storage (workspace_busy if another turn does). */
    open: (sessionId: string, options: { key?: string; waitMs?: number } = {}) =>
      this.http.json<Turn>('POST', `/v1/sessions/${path(sessionId, 'turns')}`, { body: options }),
    get: (sessionId: string, turnId: string) => this.http.json<Turn>('GET', `/v1/sessions/${path(sessionId, 'turns', turnId)}`),
    /** Closes the turn, waits for its calls and commands, gives the storage back; idempotent. */
    release: (sessionId: string, turnId: string, options: { waitMs?: number } = {}) =>
      this.http.json<Turn>('POST', `/v1/sessions/${path(sessionId, 'turns', turnId, 'release')}`, { body: options }),
    /** The file tools of an open turn. */
    files: (sessionId: string, turnId: string) => new TurnFiles(this.http, sessionId, turnId),
    /** Publishes a checkpoint of the turn's workspace. */
    checkpoint: (sessionId: string, turnId: string) => this.http.json<Checkpoint>('POST', `/v1/sessions/${path(sessionId, 'turns', turnId, 'checkpoints')}`),
    /** Gives the turn's workspace the tree of one of its checkpoints; recorded in its history as `restore`. */
    restore: (sessionId: string, turnId: string, checkpointId: string, options: RestoreOptions = {}) =>
      this.http.json<Restored>('POST', `/v1/sessions/${path(sessionId, 'turns', turnId, 'restore')}`, { body: { checkpoint: checkpointId, ...options } }),
    /**
     * Opens a turn, runs `fn` with it and always releases it (the release waits for the commands `fn` started). An
     * error of `fn` wins over one of the release.
     */
    with: async <T>(sessionId: string, fn: (turn: OpenTurn) => Promise<T>, options: WithTurnOptions = {}): Promise<T> => {
      const { releaseWaitMs, ...open } = options;
      const turn = await this.turns.open(sessionId, open);
      const release = () => this.turns.release(sessionId, turn.id, releaseWaitMs === undefined ? {} : { waitMs: releaseWaitMs });
      let result: T;
      try {
        result = await fn({
          turn,
          files: this.turns.files(sessionId, turn.id),
          run: (command, runOptions) => this.executions.run({ session: sessionId, turn: turn.id }, command, runOptions),
          checkpoint: () => this.turns.checkpoint(sessionId, turn.id),
          restore: (checkpointId, restoreOptions) => this.turns.restore(sessionId, turn.id, checkpointId, restoreOptions),
        });
      } catch (error) {
        await release().catch(() => undefined);
        throw error;
      }
      await release();
      return result;
    },
  };

  readonly leases = {
    /** Binds work to a lease by key (allocates nothing); the same binding again answers the same lease. */
    bind: (input: BindLease) => this.http.json<Lease>('POST', '/v1/leases', { body: input }),
    get: (key: string) => this.http.json<Lease>('GET', `/v1/leases/${path(key)}`),
    /** Every lease of the caller's scope not released, optionally of one work (every page). */
    list: (query: LeaseQuery = {}) => collect(this.leases.iterate(query)),
    page: (query: LeaseQuery & PageOptions = {}) => readPage<Lease>(this.http, '/v1/leases', { ...query }),
    iterate: (query: LeaseQuery & PageOptions = {}) => everyItem((cursor) => this.leases.page({ ...query, cursor }), query.cursor),
    /**
     * The lease's machine, made if there is none. With `suspend`, a spawn refused by a quota or policy pauses the
     * lease instead and rejects with invalid_state (reason `paused`, detail.lease).
     */
    acquire: (key: string, options: { suspend?: boolean } = {}) => this.http.json<LeaseTarget>('POST', `/v1/leases/${path(key, 'acquire')}`, { body: options }),
    /** Pauses the work; `retryAt` (ms since the epoch) sets the timer that resumes it. */
    pause: (key: string, pause: LeasePause) => this.http.json<Lease>('POST', `/v1/leases/${path(key, 'pause')}`, { body: pause }),
    /** Releases the lease `timeoutMs` from now unless called again (null clears it); the server keeps it across restarts. */
    setTimeout: (key: string, timeoutMs: number | null) => this.http.json<Lease>('POST', `/v1/leases/${path(key, 'timeout')}`, { body: { timeoutMs } }),
    hold: (key: string) => this.http.json<Lease>('POST', `/v1/leases/${path(key, 'hold')}`),
    resume: (key: string) => this.http.json<Lease>('POST', `/v1/leases/${path(key, 'resume')}`),
    /** Removes the machine (its workspace view saved first) and ends the lease. */
    release: (key: string) => this.http.json<Lease>('POST', `/v1/leases/${path(key, 'release')}`),
    /** The lease's changes of state after `fromPosition` (default: all), resumed across drops, ending at `released`. */
    events: (key: string, fromPosition?: bigint): Feed<LeasePauseFrame> => followLeasePauses(this.http, key, fromPosition, this.backoff),
  };

  readonly executions = {
    /** Submits once, retrying transient failures with the same operationId. */
    submit: (input: SubmitExecution, signal?: AbortSignal): Promise<ExecutionRecordJson> =>
      this.retry(() => this.http.json<ExecutionRecordJson>('POST', '/v1/executions', { body: input, signal }), signal),
    get: (id: string, options: { waitMs?: number } = {}) =>
      this.http.json<ExecutionRecordJson>('GET', `/v1/executions/${path(id)}`, { query: options }),
    /** Every execution record matching `query` (every page). */
    list: (query: ExecutionQuery = {}) => collect(this.executions.iterate(query)),
    page: (query: ExecutionQuery & PageOptions = {}) => readPage<ExecutionRecordJson>(this.http, '/v1/executions', { ...query }),
    iterate: (query: ExecutionQuery & PageOptions = {}): AsyncGenerator<ExecutionRecordJson> =>
      everyItem((cursor) => this.executions.page({ ...query, cursor }), query.cursor),
    cancel: (id: string) => this.http.json<ExecutionRecordJson>('POST', `/v1/executions/${path(id)}/cancel`),
    /** Bytes of one stream from a cursor, with the next cursor and whether the stream is complete. */
    output: async (id: string, options: { stream?: OutputStream; cursor?: number; maxBytes?: number } = {}) => {
      const response = await this.http.send('GET', `/v1/executions/${path(id)}/output`, { query: options });
      return {
        data: Buffer.from(await response.arrayBuffer()),
        next: Number(response.headers.get('x-berth-cursor')),
        complete: response.headers.get('x-berth-complete') === 'true',
      };
    },
    /** Follows an existing execution until its terminal status (reconnecting as needed). */
    follow: (id: string, options: FollowOptions = {}) =>
      followExecution(this.http, id, { backoff: this.backoff, ...options }),
    /**
     * Runs a command (in an environment, or a session and one of its turns) and resolves with the final record. Aborting `signal` cancels the execution and rejects;
     * a dropped connection does not (it reconnects).
     */
    run: async (where: RunWhere, command: string[] | string, options: RunOptions = {}): Promise<ExecutionRecordJson> => {
      const { operationId = randomUUID(), pty, cwd, env, timeoutMs, onSubmitted, ...follow } = options;
      const place = typeof where === 'string' ? { environment: where } : where;
      const record = await this.executions.submit(
        { operationId, ...place, command, pty, cwd, env, timeoutMs, stdin: options.stdin !== undefined },
        options.signal,
      );
      onSubmitted?.(record);
      const onAbort = () => void this.executions.cancel(record.id).catch(() => undefined);
      options.signal?.addEventListener('abort', onAbort, { once: true });
      try {
        return await this.executions.follow(record.id, follow);
      } finally {
        options.signal?.removeEventListener('abort', onAbort);
      }
    },
  };

  /** The read models (the admin's): position, lag and failure of each, and a rebuild after a fix. */
  readonly projections = {
    list: () => this.http.json<ProjectionState[]>('GET', '/v1/projections'),
    rebuild: (name: string) => this.http.json<ProjectionState>('POST', `/v1/projections/${path(name)}/rebuild`, { body: {} }),
  };

  /** The runtimes sharing the server's event store (the admin's), and the retirement of one (its actors adopted here). */
  readonly runtimes = {
    list: () => this.http.json<RuntimeStatus[]>('GET', '/v1/runtimes'),
    retire: (runtimeId: string) => this.http.json<RetirementReport>('POST', `/v1/runtimes/${path(runtimeId)}/retire`, { body: {} }),
  };

  readonly streams = {
    /** One stream's events up to revision `at` (default: all), each with the state before and after it. */
    replay: async (stream: string, at?: number) =>
      // Answered as it is read (chunked): through fetch, never asked directly first and again.
      (await (await this.http.send('GET', `/v1/streams/${path(stream)}`, { query: { at } })).json()) as ReplayStepJson[],
  };

  readonly events = {
    /** The scope's audit feed after `fromPosition` (exclusive; default: from the start; 'now': what comes next), resumed across drops. */
    follow: (fromPosition?: bigint | 'now'): EventFeed => followEvents(this.http, fromPosition, this.backoff),
    /** The scope's audit feed after `fromPosition` up to the newest event when the server answers, then it ends. */
    read: (fromPosition?: bigint): EventFeed => followEvents(this.http, fromPosition, this.backoff, true),
  };
}
