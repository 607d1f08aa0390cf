/**
 * Events of the execution stream (`execution-<id>`): one command run on one allocation target, from acceptance to
 * the executor's release. Output bytes never enter events, only their sizes and artifact digests (DESIGN §3).
 */
import { z } from 'zod';
import { environmentIdSchema, resourceIdSchema } from '../ids.ts';
import { perOutputStream } from '../output.ts';
import { executionStatusSchema } from '../states.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema, runtimeRecoveredSchema } from './runtime.ts';

export const targetSchema = z.strictObject({
  environmentId: environmentIdSchema,
  allocationId: resourceIdSchema,
  generation: z.number().int().positive(),
});

const artifactSchema = z.strictObject({ digest: z.string().min(1), size: z.number().int().nonnegative() });
const sizeSchema = z.number().int().nonnegative();

export const executionEvents = {
  /**
   * The operation, persisted before anything is sent. `env` holds only what the caller chose (Berth adds the
   * version's PATH/PROJECT_ROOT at submit, from `version`); it is stored because recovery of an accepted execution
   * must still be able to submit it.
   */
  'execution.accepted': z
    .strictObject({
      operationId: z.string().min(1).max(256),
      inputDigest: z.string().min(1),
      environmentId: environmentIdSchema,
      target: targetSchema,
      command: z.array(z.string()).min(1),
      cwd: z.string().optional(),
      env: z.record(z.string(), z.string()).optional(),
      stdin: z.boolean(),
      pty: z.strictObject({ cols: z.number().int().positive(), rows: z.number().int().positive() }).optional(),
      timeoutMs: z.number().int().positive().optional(),
      version: z.number().int().positive().optional(),
      /** The most output bytes (all streams) the command may write before it is stopped; absent: unbounded. */
      outputLimitBytes: z.number().int().positive().optional(),
      sessionId: resourceIdSchema.optional(),
      /** A shell command of a tool turn: it runs in the workspace's view, at `cwd` relative to its root. */
      workspace: z
        .strictObject({
          workspaceId: resourceIdSchema,
          turnId: resourceIdSchema,
          cwd: z.string().max(4096),
          /** The view is a mount of the allocation (issue 14) at this generation: it is checkpointed before the output is saved. */
          mountGeneration: z.number().int().positive().optional(),
        })
        .optional(),
      scope: z.string().min(1),
      at: atSchema,
    })
    .refine((e) => e.target.environmentId === e.environmentId, {
      message: 'the target must be an allocation of the execution\'s environment',
      path: ['target', 'environmentId'],
    }),
  /** The execution holds its allocation use and is about to be submitted (persisted before `executor.submit`). */
  'execution.dispatched': z.strictObject({ at: atSchema }),
  /** The executor's receipt says running. `at` is the receipt's start time. */
  'execution.started': z.strictObject({ pid: z.number().int().positive().optional(), at: atSchema }),
  'execution.exited': z.strictObject({
    exitCode: z.number().int().nullable(),
    signal: z.string().nullable(),
    cancelled: z.boolean().optional(),
    timedOut: z.boolean().optional(),
    at: atSchema,
  }),
  /** The process tree and every output stream are drained; `sizes` are the final byte counts. */
  'execution.drained': z.strictObject({
    sizes: perOutputStream(sizeSchema),
    at: atSchema,
  }),
  /** Output copied into the artifact store. */
  'execution.saved': z.strictObject({
    artifacts: perOutputStream(artifactSchema),
    at: atSchema,
  }),
  /** The executor spool is dropped and the allocation use released: nothing is left to do. */
  'execution.released': z.strictObject({ at: atSchema }),
  /**
   * What the checkpoint of the view it wrote came to (issue 14): `published` (the head is `revision`, whose tree is
   * `checkpointId`), `stale` (the head had moved: the execution is unsaved, a recapture of the view follows) or
   * `failed` (nothing captured: `code` says why).
   */
  'execution.checkpointed': z.strictObject({
    outcome: z.enum(['published', 'stale', 'failed']),
    attemptId: resourceIdSchema,
    checkpointId: z.string().optional(),
    revision: z.number().int().positive().optional(),
    code: z.string().optional(),
    at: atSchema,
  }),
  /** The running command wrote `written` bytes, past its `outputLimitBytes`: it is stopped (cancelled) for that. */
  'execution.output_exceeded': z.strictObject({ written: sizeSchema, limit: sizeSchema, at: atSchema }),
  /**
   * Persisted before the cancel is sent to the executor. `failure`: the server stopped it (its data directory under
   * the reserve), recorded as the execution's failure.
   */
  'execution.cancel_requested': z.strictObject({ failure: z.strictObject({ code: z.string().min(1), message: z.string() }).optional(), at: atSchema }),
  /** The executor confirmed the process tree is gone. */
  'execution.cancel_confirmed': z.strictObject({ at: atSchema }),
  /** Could not start, and no receipt exists (e.g. stale_target when acquiring the allocation use). */
  'execution.failed': z.strictObject({ code: z.string().min(1), message: z.string(), at: atSchema }),
  /** No receipt proves what happened (recovery found none and fenced the operation): never run again. */
  'execution.unknown': z.strictObject({ reason: z.string(), at: atSchema }),
  /**
   * Retention's tombstone: the record of a released execution, kept when its output aged out and its stream was
   * compacted to this one event (every event before it is gone). The first event of a compacted stream.
   */
  'execution.compacted': z.strictObject({
    operationId: z.string().min(1).max(256),
    inputDigest: z.string().min(1),
    environmentId: environmentIdSchema,
    target: targetSchema,
    command: z.array(z.string()).min(1),
    version: z.number().int().positive().optional(),
    scope: z.string().min(1),
    status: executionStatusSchema.exclude(['accepted', 'running']),
    exitCode: z.number().int().nullable(),
    signal: z.string().nullable(),
    failure: z.strictObject({ code: z.string().min(1), message: z.string() }).nullable(),
    createdAt: atSchema,
    finishedAt: atSchema,
    /** Bytes of output the execution had (every stream), and where they are now. */
    outputBytes: sizeSchema,
    output: z.enum(['removed', 'archived']),
    /** The artifacts as they were saved: the names of archived ones in the archive directory. */
    artifacts: perOutputStream(artifactSchema),
    at: atSchema,
  }),
  'runtime.recovered': runtimeRecoveredSchema,
};

export type ExecutionEvent = EventUnion<typeof executionEvents>;
export type Target = z.output<typeof targetSchema>;
