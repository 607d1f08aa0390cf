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
/** Headers of a `read` answer, whose body is the raw bytes. */
export const READ_NEXT_HEADER = 'berth-next';
export const READ_CLOSED_HEADER = 'berth-closed';
/** The most bytes one `read` answers (a caller asking more gets this much and reads on). */
export const MAX_READ_BYTES = 16 << 20;

const id = z.string().min(1).max(200).regex(/^[A-Za-z0-9._:-]+$/, 'must be an id ([A-Za-z0-9._:-])');

/** What `GET /v1/hello` answers: the version exchange, and the incarnation every later call must name. */
export const helloSchema = z.strictObject({
  protocol: z.number().int(),
  /** The host's data directory's identity: another one at the same address (reinstalled, replaced) is foreign. */
  incarnation: z.string().min(1),
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

export const physicalIdentitySchema = z.strictObject({
  provider: z.literal('remote'),
  resourceId: z.string(),
  incarnation: z.string().optional(),
});

/** The provider calls' answers (allocate, inspect): Provider's AllocationReport, as the host sends it. */
export const wireReportSchema = z.discriminatedUnion('status', [
  z.strictObject({ status: z.literal('ready'), identity: physicalIdentitySchema }),
  z.strictObject({ status: z.literal('pending'), identity: physicalIdentitySchema.optional(), reason: z.string() }),
  z.strictObject({ status: z.literal('absent') }),
  z.strictObject({ status: z.literal('unknown'), reason: z.string() }),
  z.strictObject({ status: z.literal('fenced'), identity: physicalIdentitySchema, reason: z.string() }),
]);

export const deallocateAnswerSchema = z.strictObject({ result: z.enum(['terminated', 'unknown']) });
