/**
 * Events of the workspace stream (`workspace-<hwsp_…>`, issue 13, DESIGN §10): a durable storage identity
 * `{scope, storageId}` with a binding generation, and the history of what tools and commands changed in it. No path
 * of the host and no file bytes are recorded: a root is named by a digest of its canonical path and filesystem
 * identity, a file by its relative path, size and content hash.
 */
import { z } from 'zod';
import { resourceIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { attemptReasonSchema, manifestIdSchema } from './mount.ts';
import { atSchema, runtimeRecoveredSchema } from './runtime.ts';

export const workspaceKindSchema = z.enum(['directory', 'managed']);
export const storageIdSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'expected 1-128 letters, digits, dots, dashes or underscores');
/** sha256 of (canonical root, dev, ino): equal across restarts while the same directory is there. */
export const rootIdentitySchema = z.string().regex(/^[0-9a-f]{64}$/);

const stampSchema = z.strictObject({ size: z.number().int().nonnegative(), hash: z.string().max(80) });
export const fileChangeSchema = z.strictObject({
  path: z.string().min(1).max(4096),
  kind: z.enum(['file', 'directory']),
  before: stampSchema.nullable(),
  after: stampSchema.nullable(),
});
/** The most changes one history event holds; a larger shell change records the first ones and `truncated`. */
export const MAX_CHANGES_PER_EVENT = 1000;

export const workspaceEvents = {
  'workspace.created': z.strictObject({
    scope: z.string().min(1),
    kind: workspaceKindSchema,
    storageId: storageIdSchema,
    name: z.string().trim().min(1).max(200).optional(),
    identity: rootIdentitySchema,
    at: atSchema,
  }),
  /** A directory root found replaced at a start (same mapping, another directory): sessions bound before are stale. */
  'workspace.rebound': z.strictObject({ identity: rootIdentitySchema, at: atSchema }),
  /** What a tool call or a shell command (its before/after manifests) changed, in the turn that did it. */
  'workspace.files_changed': z.strictObject({
    turnId: resourceIdSchema,
    tool: z.enum(['write', 'edit', 'mkdir', 'remove', 'stage', 'shell', 'restore']),
    executionId: resourceIdSchema.optional(),
    /** restore: the checkpoint whose tree the workspace was given back; shell: the checkpoint that carried the changes. */
    checkpointId: manifestIdSchema.optional(),
    changes: z.array(fileChangeSchema).max(MAX_CHANGES_PER_EVENT),
    /** More changed than `changes` holds (or the manifest was cut at its limits). */
    truncated: z.boolean().optional(),
    at: atSchema,
  }),
  /**
   * A checkpoint attempt published (issue 14): the head moves from `baseRevision` to the next revision, whose tree is
   * `checkpointId`. Accepted only while the head is still `baseRevision` (a stale attempt cannot publish over a newer
   * head) and only once per attempt.
   */
  'workspace.checkpoint_published': z.strictObject({
    attemptId: resourceIdSchema,
    checkpointId: manifestIdSchema,
    baseRevision: z.number().int().nonnegative(),
    reason: attemptReasonSchema,
    executionId: resourceIdSchema.optional(),
    mountGeneration: z.number().int().positive().optional(),
    files: z.number().int().nonnegative(),
    bytes: z.number().int().nonnegative(),
    at: atSchema,
  }),
  /** No one holds the storage any more and none can (the ownership is retired first); a managed directory goes. */
  'workspace.deleted': z.strictObject({ at: atSchema }),
  /** The managed directory is removed (nothing to remove for a directory workspace: Berth never owned it). */
  'workspace.removed': z.strictObject({ at: atSchema }),
  'runtime.recovered': runtimeRecoveredSchema,
};

export type WorkspaceEvent = EventUnion<typeof workspaceEvents>;
