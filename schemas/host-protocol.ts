/**
 * The Execution Host protocol (DESIGN §15): what the control plane's `remote` provider sends a `berth host` over HTTP
 * (a Unix socket or TLS), versioned and checked before any dispatch. Every call names its allocation target, which
 * the host fences (generation, host incarnation) before it touches anything.
 */
import { z } from 'zod';
import { outputStreamSchema, perOutputStream } from './output.ts';
import { profileSchema } from './profile.ts';

/** Bumped on any incompatible change; a host and a client of different versions refuse each other before dispatch. */
export const HOST_PROTOCOL_VERSION = 1;
/** The request header every call carries its protocol version in (the host checks it before reading the body). */
export const PROTOCOL_HEADER = 'berth-host-protocol';
/** The header a WebSocket upgrade (GET /v1/exec/follow) carries its follow call in, as JSON (it has no body). */
export const CALL_HEADER = 'berth-call';
/** Headers of a `read` answer, whose body is the raw bytes. */
export const READ_NEXT_HEADER = 'berth-next';
export const READ_CLOSED_HEADER = 'berth-closed';
/** The most bytes one `read` answers (a caller asking more gets this much and reads on). */
export const MAX_READ_BYTES = 16 << 20;

/** Ids name files and directories on the host (views, spools, records): never `.`, `..` or a dot file. */
const id = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_:-][A-Za-z0-9._:-]*$/, 'must be an id ([A-Za-z0-9._:-], not starting with a dot)');

/** What `GET /v1/hello` answers: the version exchange, and the incarnation every later call must name. */
export const helloSchema = z.strictObject({
  protocol: z.number().int(),
  /** The host's data directory's identity: another one at the same address (reinstalled, replaced) is foreign. */
  incarnation: z.string().min(1),
  /** The providers it runs remote profiles with (a profile's `backend`): native, and docker with `berth host --docker`. */
  backends: z.array(z.enum(['native', 'docker'])).optional(),
});
export type Hello = z.infer<typeof helloSchema>;

/** The allocation a call is for; `incarnation` is the host's, learnt from hello (absent only on allocate). */
export const hostTargetSchema = z.strictObject({
  environmentId: id,
  allocationId: id,
  requestId: id,
  generation: z.number().int().min(0),
  incarnation: z.string().min(1).max(200).optional(),
});
export type HostTarget = z.infer<typeof hostTargetSchema>;

export const allocateCallSchema = z.strictObject({ target: hostTargetSchema, profile: profileSchema });
export const refCallSchema = z.strictObject({ target: hostTargetSchema });

const wireExecSpec = z.strictObject({
  operationId: id,
  command: z.array(z.string()).min(1).max(4096),
  cwd: z.string().max(4096).optional(),
  env: z.record(z.string(), z.string()),
  stdin: z.boolean(),
  pty: z.strictObject({ cols: z.number().int().min(1).max(10_000), rows: z.number().int().min(1).max(10_000) }).optional(),
  timeoutMs: z.number().int().positive().optional(),
  settleMs: z.number().int().min(0).max(10_000).optional(),
  /** The allocation's workspace view (kept on the host, filled and captured by the file calls): where it starts, relative. */
  workspace: z.strictObject({ cwd: z.string().max(4096), hidden: z.array(z.string().min(1).max(255)).max(16) }).optional(),
});

const operation = { target: hostTargetSchema, operationId: id };

/** The Executor's calls (src/providers/provider.ts), one body per `POST /v1/exec/<op>`; stdin bytes are base64. */
export const execCallSchemas = {
  submit: z.strictObject({ target: hostTargetSchema, spec: wireExecSpec }),
  status: z.strictObject(operation),
  abandon: z.strictObject(operation),
  read: z.strictObject({ ...operation, stream: outputStreamSchema, cursor: z.number().int().min(0), maxBytes: z.number().int().min(1).max(MAX_READ_BYTES).optional() }),
  waitForChange: z.strictObject({ ...operation, timeoutMs: z.number().int().min(0).max(60_000), since: perOutputStream(z.number().int().min(0)).optional() }),
  stdin: z.strictObject({ ...operation, data: z.string().max(4 << 20).base64() }),
  endStdin: z.strictObject(operation),
  resize: z.strictObject({ ...operation, cols: z.number().int().min(1).max(10_000), rows: z.number().int().min(1).max(10_000) }),
  cancel: z.strictObject(operation),
  release: z.strictObject(operation),
  /**
   * Answered with the stream's raw bytes from `cursor` as one chunked body (src/host/host-stream.ts), ended cleanly
   * only once the stream is closed: any other end is a broken body, read on from the offset reached.
   */
  stream: z.strictObject({ ...operation, stream: outputStreamSchema, cursor: z.number().int().min(0) }),
  /** Answered as server-sent events (src/host/host-follow.ts), not JSON. */
  follow: z.strictObject({ ...operation, cursors: perOutputStream(z.number().int().min(0)).optional() }),
} as const;
export type ExecOp = keyof typeof execCallSchemas;
export type ExecCall<O extends ExecOp> = z.infer<(typeof execCallSchemas)[O]>;

/** A receipt as the host sends it: the executor's own, minus the pid (remote PIDs never reach the control plane). */
export const wireReceiptSchema = z.strictObject({
  protocolVersion: z.literal(1),
  operationId: z.string(),
  state: z.enum(['absent', 'running', 'exited']),
  exitCode: z.number().int().nullable().optional(),
  signal: z.string().nullable().optional(),
  cancelled: z.boolean().optional(),
  timedOut: z.boolean().optional(),
  error: z.string().optional(),
  startedAt: z.string().optional(),
  exitedAt: z.string().optional(),
  sizes: perOutputStream(z.number().int().min(0)).optional(),
});

/** The provider calls (allocate, inspect) answer the providers' own report (allocationReportSchema, schemas/events/allocation.ts). */
export const deallocateAnswerSchema = z.strictObject({ result: z.enum(['terminated', 'unknown']) });

/**
 * The workspace file host of an allocation (src/providers/file-host.ts), one `POST /v1/files/<op>` each. Their bodies
 * and answers are framed, not JSON: `[u32 big-endian length][head: JSON][raw bytes]`. capture's head is the call and
 * its answer's the manifest, followed by the pack bytes it wrote; apply's head is the call followed by the bytes of
 * each blob it lists, in order.
 */
export const MAX_FILES_HEAD_BYTES = 64 << 20;
/** The most blob bytes one apply may send (a view's whole content: the capture bound is 4 GiB). */
export const MAX_APPLY_BYTES = 16 * 1024 ** 3;

const blobLocationSchema = z.strictObject({ pack: z.string().min(1).max(200), offset: z.number().int().min(0) });
const treeEntrySchema = z.strictObject({
  path: z.string().min(1).max(4096),
  type: z.enum(['file', 'directory', 'symlink']),
  mode: z.number().int().min(0),
  size: z.number().int().min(0),
  hash: z.string().max(100).optional(),
  blob: blobLocationSchema.optional(),
  target: z.string().max(4096).optional(),
  stat: z.string().max(200).optional(),
});
/** A checkpoint manifest's shape; what it names is checked again where it is applied (tree-manifest-check.ts). */
export const treeManifestSchema = z.strictObject({
  version: z.literal(1),
  entries: z.array(treeEntrySchema),
  files: z.number().int().min(0),
  bytes: z.number().int().min(0),
  skipped: z.number().int().min(0),
});

export const filesCallSchemas = {
  capture: z.strictObject({
    target: hostTargetSchema,
    previous: treeManifestSchema.optional(),
    limits: z.strictObject({ maxEntries: z.number().int().min(0), maxBytes: z.number().int().min(0) }),
    /** The control plane's pack: its name and the offset its next blob lands at (the manifest's locations name both). */
    pack: z.strictObject({ name: blobLocationSchema.shape.pack, offset: z.number().int().min(0) }),
  }),
  apply: z.strictObject({
    target: hostTargetSchema,
    manifest: treeManifestSchema,
    base: treeManifestSchema.optional(),
    /** The blobs whose bytes follow the head, in order. */
    blobs: z.array(blobLocationSchema.extend({ size: z.number().int().min(0) })),
  }),
} as const;
export type FilesOp = keyof typeof filesCallSchemas;
export type FilesCall<O extends FilesOp> = z.infer<(typeof filesCallSchemas)[O]>;
