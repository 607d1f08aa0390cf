/**
 * Events of the mount stream (`mount-<workspaceId>`, issue 14, DESIGN §10): the one writable view of a workspace on
 * an allocation that holds it in a staging area of its own (a Docker staging volume), with a mount generation of its
 * own; the checkpoint attempts that save it, each recorded before it captures; its detachment. A view the directory
 * itself is (native) needs no mount: its files are the workspace's already.
 */
import { z } from 'zod';
import { environmentIdSchema, resourceIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema, runtimeRecoveredSchema } from './runtime.ts';

export const mountTargetSchema = z.strictObject({
  environmentId: environmentIdSchema,
  allocationId: resourceIdSchema,
  /** The allocation's generation (its environment's count of allocations), not the mount's. */
  generation: z.number().int().positive(),
});

/** A tree manifest's id (src/runtime/workspaces/checkpoint-packs.ts): sha256 of its JSON. */
export const manifestIdSchema = z.string().regex(/^sha256:[0-9a-f]{64}$/);

/** What the view held when it was last in step with the workspace: the head revision and that tree. */
export const viewBaseSchema = z.strictObject({ revision: z.number().int().nonnegative(), manifest: manifestIdSchema });

export const attemptReasonSchema = z.enum(['execution', 'explicit', 'detach', 'recapture']);

export const mountEvents = {
  /** A view is made on `target` at `mountGeneration`, filled with the head `base` (its effect materializes it). */
  'mount.prepare_requested': z.strictObject({
    scope: z.string().min(1),
    target: mountTargetSchema,
    mountGeneration: z.number().int().positive(),
    base: viewBaseSchema,
    at: atSchema,
  }),
  'mount.prepared': z.strictObject({ at: atSchema }),
  /** Materialization failed or its outcome is unclear: the view is unavailable and keeps its allocation use. */
  'mount.prepare_failed': z.strictObject({ code: z.string().min(1), message: z.string(), at: atSchema }),
  /** The view was brought to a newer head before a command ran in it (tool edits since). */
  'mount.refreshed': z.strictObject({ base: viewBaseSchema, at: atSchema }),
  /** An execution will write the view: it holds it (no detachment) from before its dispatch until it is saved. */
  'mount.pinned': z.strictObject({ executionId: resourceIdSchema, at: atSchema }),
  'mount.unpinned': z.strictObject({ executionId: resourceIdSchema, at: atSchema }),
  /**
   * A checkpoint attempt, persisted before anything is captured: the binding generation it expects, the target and
   * mount generation it captures, the head revision it builds on, and its own identity (the receipt id).
   */
  'mount.checkpoint_started': z.strictObject({
    attemptId: resourceIdSchema,
    reason: attemptReasonSchema,
    executionId: resourceIdSchema.optional(),
    bindingGeneration: z.number().int().positive(),
    target: mountTargetSchema,
    mountGeneration: z.number().int().positive(),
    baseRevision: z.number().int().nonnegative(),
    at: atSchema,
  }),
  /** The workspace head moved to this attempt's checkpoint (`revision`); the view is in step at that revision. */
  'mount.checkpoint_published': z.strictObject({
    attemptId: resourceIdSchema,
    checkpointId: manifestIdSchema,
    revision: z.number().int().positive(),
    view: viewBaseSchema,
    at: atSchema,
  }),
  /** The head had moved past the attempt's base: nothing published (a recapture attempt follows for an execution). */
  'mount.checkpoint_stale': z.strictObject({ attemptId: resourceIdSchema, head: z.number().int().nonnegative(), at: atSchema }),
  /** The capture failed (the view is gone, a limit): nothing published; a detach keeps trying. */
  'mount.checkpoint_failed': z.strictObject({ attemptId: resourceIdSchema, code: z.string().min(1), message: z.string(), at: atSchema }),
  /** Admission closes; a final checkpoint is published, then the view is let go (the allocation's use given back). */
  'mount.detach_requested': z.strictObject({ reason: z.enum(['explicit', 'release']), at: atSchema }),
  'mount.detached': z.strictObject({ at: atSchema }),
  /** The allocation under the view is confirmed gone: what the view held since its last checkpoint is lost. */
  'mount.lost': z.strictObject({ allocationId: resourceIdSchema, reason: z.string(), at: atSchema }),
  'runtime.recovered': runtimeRecoveredSchema,
};

export type MountEvent = EventUnion<typeof mountEvents>;
export type MountTarget = z.infer<typeof mountTargetSchema>;
export type ViewBase = z.infer<typeof viewBaseSchema>;
export type AttemptReason = z.infer<typeof attemptReasonSchema>;
