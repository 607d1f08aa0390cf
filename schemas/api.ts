/**
 * zod schemas of the gateway's wire (DESIGN §8): every path parameter, query, body and response, plus the WebSocket
 * control messages. The gateway validates requests with them and generates /v1/openapi.json from them; the typed
 * client takes its types from them. Bigints (event revisions and positions) travel as decimal strings.
 */
import { leaseKeySchema, pauseCauseSchema, workSchema } from './events/lease.ts';
import { z } from 'zod';
import { manifestIdSchema } from './events/mount.ts';
import { outputStreamSchema, type OutputStream } from './output.ts';
import { ownershipSchema, profileSchema, providerKindSchema } from './profile.ts';
import { environmentStateSchema, executionStatusSchema } from './states.ts';

// ---------------------------------------------------------------------------------------------------------- common

/** An opaque resource id in a path or a reference field: no separators, no control characters, bounded. */
export const resourceIdParam = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,255}$/, 'expected 1-256 characters of [A-Za-z0-9_.:-]');

/** A caller-chosen idempotency key: printable ASCII without spaces. */
export const operationIdSchema = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, 'expected printable ASCII without spaces');

/** A non-negative decimal integer in a query string (a byte cursor, a revision, milliseconds). */
export const decimalQuery = (max: number) =>
  z
    .string()
    .regex(/^\d{1,16}$/, 'expected a non-negative decimal integer')
    .transform(Number)
    .pipe(z.number().int().min(0).max(max));

export const cursorQuery = decimalQuery(Number.MAX_SAFE_INTEGER);

/** Items per page of a list route: `limit` defaults to the first and may not exceed the second. */
export const PAGE_LIMIT_DEFAULT = 100;
export const PAGE_LIMIT_MAX = 1000;
/** The response header that carries the cursor of the next page; absent on the last page. */
export const NEXT_CURSOR_HEADER = 'x-berth-next-cursor';

/** The query every list route takes: a page size, the opaque cursor of a previous page, the order (oldest first). */
export const pageQuery = {
  limit: z
    .string()
    .regex(/^\d{1,4}$/, 'expected an integer from 1 to 1000')
    .transform(Number)
    .pipe(z.number().int().min(1).max(PAGE_LIMIT_MAX))
    .optional(),
  cursor: z.string().min(1).max(128).optional(),
  order: z.enum(['asc', 'desc']).optional(),
};
export const listQuery = z.strictObject(pageQuery);

export const idParams = z.strictObject({ id: resourceIdParam });

export const errorBodySchema = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    detail: z.record(z.string(), z.unknown()),
  }),
});

/** Browsers cannot set headers on EventSource or WebSocket: those routes also take `?token=` (never logged). */
const queryToken = z.string().min(1).max(512).optional();

// ---------------------------------------------------------------------------------------------------- environments

const shortText = z.string().max(4096);

export const createEnvironmentBody = z.strictObject({
  name: z.string().min(1).max(200),
  description: shortText.optional(),
  entry: shortText.optional(),
  profile: profileSchema.optional(),
});

export const updateEnvironmentBody = z.strictObject({
  name: z.string().min(1).max(200).optional(),
  description: shortText.optional(),
  entry: shortText.optional(),
  profile: profileSchema.partial().optional(),
});

export const environmentSchema = z.looseObject({
  id: z.string(),
  object: z.literal('environment'),
  name: z.string(),
  slug: z.string(),
  description: z.string(),
  entry: z.string(),
  status: z.string(),
  mount: z.string(),
  version: z.number().nullable(),
  latestVersion: z.number().nullable(),
  profile: profileSchema,
  availability: z.enum(['available', 'unavailable']),
  /** The allocation lifecycle (`status` is the content's, seed 001). */
  state: environmentStateSchema,
  allocation: z
    .strictObject({ allocationId: z.string(), generation: z.number(), state: z.string() })
    .nullable(),
  createdAt: z.number(),
  updatedAt: z.number(),
});

// ----------------------------------------------------------------------------------------------------- allocations

export const allocationParams = z.strictObject({ id: resourceIdParam, allocationId: resourceIdParam });

export const allocationSchema = z.looseObject({
  allocationId: z.string(),
  environmentId: z.string(),
  generation: z.number(),
  state: z.string(),
  provider: providerKindSchema,
  ownership: ownershipSchema,
  identity: z.looseObject({ resourceId: z.string(), incarnation: z.string().optional() }).optional(),
  uses: z.array(z.looseObject({ useId: z.string(), kind: z.string() })),
  createdAt: z.number(),
  updatedAt: z.number(),
});

// -------------------------------------------------------------------------------------------------------- sessions

export const createSessionBody = z
  .strictObject({
    environmentId: resourceIdParam.nullable().optional(),
    /** Instead of environmentId: its reuse policy (the profile's, else the provider's) selects or makes the environment. */
    profile: z.record(z.string(), z.unknown()).optional(),
    workspaceId: resourceIdParam.nullable().optional(),
    /** Where its commands start, relative to the workspace root. */
    cwd: z.string().max(4096).optional(),
    parentId: resourceIdParam.optional(),
    relation: z.enum(['child', 'fork']).optional(),
  })
  .refine((b) => b.profile === undefined || b.environmentId === undefined, { message: 'name an environmentId or a profile, not both', path: ['profile'] })
  .refine((b) => b.relation === undefined || b.parentId !== undefined, { message: 'a relation needs a parentId', path: ['relation'] });

export const sessionSchema = z.looseObject({
  id: z.string(),
  environmentId: z.string().nullable(),
  environmentReuse: z.enum(['session', 'workspace', 'scope']).nullable(),
  workspaceId: z.string().nullable(),
  workspaceGeneration: z.number().nullable(),
  cwd: z.string(),
  parentId: z.string().nullable(),
  relation: z.enum(['child', 'fork']).nullable(),
  createdAt: z.number(),
});

// ------------------------------------------------------------------------------------------------------ workspaces

export const createWorkspaceBody = z.strictObject({ name: z.string().trim().min(1).max(200).optional() });

export const workspaceSchema = z.looseObject({
  id: z.string(),
  object: z.literal('workspace'),
  kind: z.enum(['directory', 'managed']),
  storageId: z.string(),
  name: z.string().nullable(),
  generation: z.number(),
  state: z.string(),
  holder: z.looseObject({ turnId: z.string(), sessionId: z.string(), since: z.number() }).nullable(),
  revision: z.number(),
  checkpoint: z.looseObject({ id: z.string(), revision: z.number() }).nullable(),
  createdAt: z.number(),
  updatedAt: z.number(),
});

const stampJson = z.looseObject({ size: z.number(), hash: z.string() }).nullable();
export const fileChangeJson = z.looseObject({ path: z.string(), kind: z.string(), before: stampJson, after: stampJson });

export const historyEntrySchema = z.looseObject({
  revision: z.number(),
  turnId: z.string(),
  tool: z.string(),
  executionId: z.string().optional(),
  changes: z.array(fileChangeJson),
  truncated: z.boolean().optional(),
  at: z.number(),
});

export const clearedSchema = z.looseObject({ cleared: z.string().nullable() });

// ------------------------------------------------------------------------------------------ checkpoints and views

/**
 * A checkpoint id is its manifest's content address. A malformed one is invalid_request (400) before any store or
 * disk is read; a well-formed one this workspace never published is not_found (404), even when another workspace did.
 */
export const checkpointIdParam = manifestIdSchema;
export const checkpointParams = z.strictObject({ id: resourceIdParam, checkpointId: checkpointIdParam });
/** Checkpoints are listed oldest first only (their stream's order): no `order`. */
export const checkpointListQuery = z.strictObject({ limit: pageQuery.limit, cursor: pageQuery.cursor });
export const diffQuery = z.strictObject({ from: checkpointIdParam, to: checkpointIdParam });
export const restoreBody = z.strictObject({
  checkpoint: checkpointIdParam,
  /** The head revision the restore builds on: stale_version (412) and nothing restored when the head is another. */
  expectedRevision: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
});

export const checkpointSchema = z.looseObject({
  id: z.string(),
  object: z.literal('checkpoint'),
  workspaceId: z.string(),
  revision: z.number(),
  attemptId: z.string(),
  reason: z.string(),
  executionId: z.string().optional(),
  mountGeneration: z.number().optional(),
  files: z.number(),
  bytes: z.number(),
  at: z.number(),
});
const treeEntryType = z.enum(['file', 'directory', 'symlink']);
export const checkpointEntrySchema = z.looseObject({
  path: z.string(),
  type: treeEntryType,
  mode: z.number(),
  size: z.number(),
  hash: z.string().optional(),
  target: z.string().optional(),
});
/** A checkpoint with its tree: at most MAX_LISTED_ENTRIES entries, `truncated` when the tree holds more. */
export const checkpointTreeSchema = checkpointSchema.extend({ entries: z.array(checkpointEntrySchema), truncated: z.literal(true).optional() });
const entryStateJson = z.looseObject({ type: treeEntryType, mode: z.number(), size: z.number(), hash: z.string().optional(), target: z.string().optional() }).nullable();
export const treeChangeJson = z.looseObject({ path: z.string(), type: treeEntryType, before: entryStateJson, after: entryStateJson });
export const checkpointDiffSchema = z.looseObject({ from: z.string(), to: z.string(), changes: z.array(treeChangeJson), truncated: z.literal(true).optional() });
export const restoredSchema = z.looseObject({ checkpointId: z.string(), changes: z.array(fileChangeJson) });
export const mountSchema = z.looseObject({
  object: z.literal('mount'),
  workspaceId: z.string(),
  state: z.string(),
  target: z.looseObject({ environmentId: z.string(), allocationId: z.string(), generation: z.number() }).nullable(),
  mountGeneration: z.number(),
  revision: z.number().nullable(),
  pins: z.array(z.string()),
  problem: z.looseObject({ code: z.string(), message: z.string() }).nullable(),
});

// ----------------------------------------------------------------------------------------------------------- turns

export const sessionTurnParams = z.strictObject({ id: resourceIdParam, turnId: resourceIdParam });

export const openTurnBody = z.strictObject({
  /** An idempotency key: the same key opens (or answers) the same turn. */
  key: operationIdSchema.optional(),
  /** Wait this long for a busy storage instead of answering workspace_busy. */
  waitMs: z.number().int().min(0).max(600_000).optional(),
});

export const releaseTurnBody = z.strictObject({ waitMs: z.number().int().min(0).max(600_000).optional() });

export const turnSchema = z.looseObject({
  id: z.string(),
  object: z.literal('turn'),
  sessionId: z.string(),
  workspaceId: z.string(),
  state: z.enum(['open', 'closing', 'released']),
  executions: z.array(z.looseObject({ executionId: z.string(), recorded: z.boolean() })),
  cleared: z.boolean(),
  createdAt: z.number(),
  updatedAt: z.number(),
});

/** A workspace path: relative to its root, checked for escapes by the tools themselves. */
const workspacePath = z.string().min(1).max(4096);

export const fileQuery = z.strictObject({ path: workspacePath });
export const readFileQuery = z.strictObject({
  path: workspacePath,
  offset: decimalQuery(Number.MAX_SAFE_INTEGER).optional(),
  limit: decimalQuery(Number.MAX_SAFE_INTEGER).optional(),
});
export const writeFileQuery = z.strictObject({ path: workspacePath, parents: z.enum(['true', 'false']).transform((v) => v === 'true').optional() });
export const listFilesQuery = z.strictObject({ path: z.string().max(4096).optional(), limit: pageQuery.limit, cursor: z.string().min(1).max(4200).optional() });
export const removeFileQuery = z.strictObject({ path: workspacePath, recursive: z.enum(['true', 'false']).transform((v) => v === 'true').optional() });
export const editFileBody = z.strictObject({
  path: workspacePath,
  old: z.string().min(1).max(1_048_576),
  new: z.string().max(1_048_576),
  ifMatch: z.string().max(100).optional(),
});
export const mkdirBody = z.strictObject({ path: workspacePath, parents: z.boolean().optional() });

export const fileWrittenJson = z.looseObject({ path: z.string(), size: z.number(), version: z.string() });
export const entryInfoSchema = z.looseObject({
  name: z.string(),
  path: z.string(),
  type: z.enum(['file', 'directory', 'symlink', 'other']),
  size: z.number(),
  mode: z.number(),
  mtimeMs: z.number(),
  version: z.string().optional(),
});
export const fileListSchema = z.looseObject({ entries: z.array(entryInfoSchema), next: z.string().optional() });
export const fileChangesSchema = z.looseObject({ changes: z.array(fileChangeJson) });

// ------------------------------------------------------------------------------------------------------ executions

const commandArg = z.string().max(65_536);
const ptySize = z.strictObject({
  cols: z.number().int().min(1).max(1000),
  rows: z.number().int().min(1).max(1000),
});

export const submitExecutionBody = z
  .strictObject({
    operationId: operationIdSchema,
    environment: resourceIdParam.optional(),
    session: resourceIdParam.optional(),
    /** A harness (seed 001 §5): its environment is the default when `environment` is absent. */
    harness: resourceIdParam.optional(),
    command: z.union([z.array(commandArg).min(1).max(4096), commandArg.min(1)]),
    cwd: z.string().min(1).max(4096).optional(),
    env: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, 'expected an environment variable name'), z.string().max(65_536))
      .optional(),
    stdin: z.boolean().optional(),
    pty: ptySize.optional(),
    timeoutMs: z.number().int().min(1).max(7 * 24 * 3600 * 1000).optional(),
    /** A tool turn of `session`: the command runs in its workspace (cwd relative to the session's) and holds the turn. */
    turn: resourceIdParam.optional(),
    /** A lease's key (issue 15): the command runs on the lease's machine (acquired if needed), in its workspace with `turn`. */
    lease: leaseKeySchema.optional(),
    /** The allocation the caller expects to run on: refused with stale_target unless it is still current. */
    target: z
      .strictObject({
        environmentId: resourceIdParam,
        allocationId: resourceIdParam,
        generation: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
      })
      .optional(),
  })
  .refine((b) => [b.environment, b.session, b.lease].filter((x) => x !== undefined).length === (b.harness !== undefined && b.environment === undefined && b.session === undefined && b.lease === undefined ? 0 : 1), {
    message: 'exactly one of environment, session or lease is required (or a harness, which names the environment)',
    path: ['environment'],
  })
  .refine((b) => b.harness === undefined || b.session === undefined, { message: 'a harness and a session do not go together', path: ['harness'] });

export const executionRecordSchema = z.looseObject({
  id: z.string(),
  operationId: z.string(),
  environment: z.string(),
  target: z.looseObject({ environmentId: z.string(), allocationId: z.string(), generation: z.number() }),
  command: z.array(z.string()),
  status: executionStatusSchema,
  exitCode: z.number().nullable().optional(),
  signal: z.string().nullable().optional(),
  /** Its timeoutMs passed and it was killed. */
  timedOut: z.boolean().optional(),
  failure: z.looseObject({ code: z.string(), message: z.string() }).optional(),
  version: z.number().optional(),
  checkpoint: z.looseObject({ outcome: z.enum(['published', 'stale', 'failed']), id: z.string().optional(), revision: z.number().optional() }).optional(),
  createdAt: z.number(),
  updatedAt: z.number(),
});
export type ExecutionRecordJson = z.infer<typeof executionRecordSchema>;

export const getExecutionQuery = z.strictObject({ waitMs: decimalQuery(600_000).optional() });

export const listExecutionsQuery = z.strictObject({
  operationId: operationIdSchema.optional(),
  environment: resourceIdParam.optional(),
  status: executionStatusSchema.optional(),
  ...pageQuery,
});

export const outputQuery = z.strictObject({
  stream: outputStreamSchema.default('stdout'),
  cursor: cursorQuery.default(0),
  maxBytes: decimalQuery(64 * 1024 * 1024).pipe(z.number().min(1)).optional(),
});

/** Start cursors per stream; a missing one starts at 0. */
const streamCursors = {
  stdout: cursorQuery.optional(),
  stderr: cursorQuery.optional(),
  pty: cursorQuery.optional(),
};

/** SSE output: `stream` follows one stream only (then Last-Event-ID alone resumes it exactly). */
export const executionEventsQuery = z.strictObject({
  ...streamCursors,
  stream: outputStreamSchema.optional(),
  token: queryToken,
});

export const executionStreamQuery = z.strictObject({ ...streamCursors, token: queryToken });

/** SSE output id: `<stream>:<cursor>`, the cursor after the event's bytes. */
export const outputEventIdSchema = z
  .string()
  .regex(/^(stdout|stderr|pty):\d{1,16}$/, 'expected <stream>:<cursor>')
  .transform((s) => {
    const [stream, cursor] = s.split(':') as [OutputStream, string];
    return { stream, cursor: Number(cursor) };
  })
  .pipe(z.object({ stream: outputStreamSchema, cursor: z.number().int().max(Number.MAX_SAFE_INTEGER) }));

/** The `data` of an SSE `output` event. */
export const outputEventDataSchema = z.strictObject({
  stream: outputStreamSchema,
  cursor: z.number().int().min(0),
  data: z.base64(),
});

// ---------------------------------------------------------------------------------------------------- WebSocket

/** Client -> server text frames. Binary frames are stdin bytes. */
export const wsClientControlSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('resize'), cols: ptySize.shape.cols, rows: ptySize.shape.rows }),
  z.strictObject({ type: z.literal('end') }),
]);
export type WsClientControl = z.infer<typeof wsClientControlSchema>;

/** Server -> client text frames: a status on every change; an error when the runtime refused a client frame. */
export const wsServerTextSchema = z.union([
  executionRecordSchema.extend({ type: z.literal('status') }),
  z.strictObject({ type: z.literal('error'), error: errorBodySchema.shape.error }),
]);

// ------------------------------------------------------------------------------------------------- events, replay

/** A recorded event on the wire: revision and position are decimal strings (bigints in the store). */
export const recordedEventJsonSchema = z.strictObject({
  id: z.string(),
  stream: z.string(),
  revision: z.string().regex(/^\d+$/),
  position: z.string().regex(/^\d+$/),
  type: z.string(),
  data: z.unknown(),
  metadata: z.record(z.string(), z.unknown()),
  createdAt: z.string(),
});
export type RecordedEventJson = z.infer<typeof recordedEventJsonSchema>;

export const streamParams = z.strictObject({
  stream: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,511}$/, 'expected a stream name <category>-<id>'),
});

export const replayQuery = z.strictObject({ at: decimalQuery(Number.MAX_SAFE_INTEGER).optional() });

/** The context keys one event changed, each with its value before and after (null: no machine folds the stream). */
/** Each context key that changed, with its value before and after (a side is absent when the key was unset there). */
export const contextDiffSchema = z
  .record(z.string(), z.strictObject({ before: z.unknown().optional(), after: z.unknown().optional() }))
  .nullable();

export const replayStepSchema = z.strictObject({
  event: recordedEventJsonSchema,
  stateBefore: z.unknown(),
  stateAfter: z.unknown(),
  contextDiff: contextDiffSchema,
});

/**
 * The largest global position: stores count in signed 64 bits (SQLite refused a larger bound value, and the feed
 * failed as `internal`), so a larger number names no event.
 */
const MAX_POSITION = 2n ** 63n - 1n;
const isPosition = (value: string): boolean => /^\d{1,19}$/.test(value) && BigInt(value) <= MAX_POSITION;

/** Audit feed start: `after` (exclusive global position, or `now`) or the Last-Event-ID header. */
export const eventsFeedQuery = z.strictObject({
  /** `now`: only events appended after the request (a live view that already read its lists). */
  after: z
    .string()
    .regex(/^(\d{1,19}|now)$/, 'expected a global position or "now"')
    .refine((value) => value === 'now' || isPosition(value), 'expected a global position or "now"')
    .optional(),
  /** `head`: the stream ends after the newest event at the request (a listing rather than a live feed). */
  until: z.literal('head').optional(),
  token: queryToken,
});

export const positionEventIdSchema = z.string().regex(/^\d{1,19}$/, 'expected a global position').refine(isPosition, 'expected a global position');

/** A lease's pause feed: resumed after a global position only (it replays the lease, then follows it to its release). */
export const leaseEventsQuery = z.strictObject({ after: positionEventIdSchema.optional(), token: queryToken });

// ---------------------------------------------------------------------------------------------------------- leases

const envVarName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, 'expected an environment variable name');

export const leaseKeyParams = z.strictObject({ key: leaseKeySchema });

export const bindLeaseBody = z.strictObject({
  key: leaseKeySchema,
  work: workSchema,
  profile: profileSchema.optional(),
  environmentId: resourceIdParam.optional(),
  workspaceId: resourceIdParam.optional(),
  /** The machine's image and the variables every command of the lease gets (kept out of every answer). */
  spawn: z.strictObject({ image: z.string().min(1).max(512).optional(), env: z.record(envVarName, z.string().max(65_536)).optional() }).optional(),
  idleSeconds: z.number().int().min(0).max(31_536_000).optional(),
});

/** `POST /v1/leases/{key}/timeout`: the lease is released this long from now (null: never, the default). */
export const leaseTimeoutBody = z.strictObject({ timeoutMs: z.number().int().min(0).max(31_536_000_000).nullable() });

export const listLeasesQuery = z.strictObject({ ...pageQuery, workKind: workSchema.shape.kind.optional(), workId: workSchema.shape.id.optional() });

export const acquireLeaseBody = z.strictObject({ suspend: z.boolean().optional() }).default({});

export const pauseLeaseBody = z.strictObject({ cause: pauseCauseSchema, retryAt: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional() });

const leasePauseJson = z.looseObject({ state: z.string(), cause: pauseCauseSchema, attempt: z.number(), pausedAt: z.number(), retryAt: z.number().nullable() });

export const leaseSchema = z.looseObject({
  id: z.string(),
  object: z.literal('lease'),
  key: z.string(),
  work: workSchema,
  state: z.enum(['running', 'paused', 'held', 'releasing', 'released']),
  environmentId: z.string().nullable(),
  workspaceId: z.string().nullable(),
  sessionId: z.string().nullable(),
  machine: z.looseObject({ allocationId: z.string(), generation: z.number() }).nullable(),
  pause: leasePauseJson.nullable(),
  idleSeconds: z.number(),
  /** When the server releases the lease (ms since the epoch: its timeout), or null. */
  deadline: z.number().nullable(),
  createdAt: z.number(),
  updatedAt: z.number(),
});

export const leaseTargetSchema = z.looseObject({
  lease: leaseSchema,
  target: z.looseObject({ environmentId: z.string(), allocationId: z.string(), generation: z.number() }),
  reused: z.boolean(),
});

/** One frame of a lease's pause feed (`event: pause`, `id:` the global position of the event that made it). */
export const leasePauseFrameSchema = z.strictObject({
  key: z.string(),
  state: leaseSchema.shape.state,
  cause: pauseCauseSchema.nullable(),
  attempt: z.number().nullable(),
  retryAt: z.number().nullable(),
  at: z.number(),
});

// ---------------------------------------------------------------------------------------------------------- misc

export const capabilitiesSchema = z.strictObject({ capabilities: z.record(z.string(), z.boolean()) });
export const healthSchema = z.looseObject({
  /** `degraded`: the process serves, but a read model failed (`failedProjections`; they answer projection_failed). */
  status: z.enum(['ok', 'degraded']),
  failedProjections: z.array(z.string()).optional(),
  runtimeId: z.string().optional(),
  epoch: z.number().optional(),
  store: z.string().optional(),
});
export const activitySchema = z.array(z.unknown());
export const emptyQuery = z.strictObject({});

/** A runtime sharing the event store (`GET /v1/runtimes`, issue #17). */
export const runtimeStatusSchema = z.object({
  runtimeId: z.string(),
  epoch: z.number().int(),
  state: z.enum(['started', 'serving', 'stopped', 'retired']).describe('started: fenced but not listening (or a CLI command\'s own runtime)'),
  url: z.string().nullable().describe('Where it answers, as it announced'),
  hostname: z.string(),
  pid: z.number().int(),
  startedAt: z.string(),
  retiredBy: z.string().nullable(),
  self: z.boolean().describe('The runtime answering this request'),
});
export type RuntimeStatus = z.infer<typeof runtimeStatusSchema>;

/** What a retirement adopted (`POST /v1/runtimes/{runtimeId}/retire`). */
export const retirementReportSchema = z.object({
  runtimeId: z.string(),
  adopted: z.number().int().describe('Unfinished actors it owned that the answering runtime took over'),
  recovered: z.number().int().describe('Of those, the ones reconciled (sent runtime.recovered)'),
  failed: z.number().int(),
});
export type RetirementReport = z.infer<typeof retirementReportSchema>;
