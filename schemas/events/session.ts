/**
 * Events of the session stream (`session-<id>`): which Environment and Workspace a session selects. Selecting never
 * allocates. Machines read no other stream, so the creator passes the parent's (or forked session's) selection.
 */
import { z } from 'zod';
import { environmentIdSchema, resourceIdSchema } from '../ids.ts';
import { reusePolicySchema } from '../profile.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema } from './runtime.ts';

/** A relative directory under the workspace root (confined when the session is created). */
export const sessionCwdSchema = z.string().max(4096);

/** A selection: an Environment id, or null for "no command execution". */
export const environmentSelectionSchema = environmentIdSchema.nullable();

export const sessionEvents = {
  /**
   * environmentId: a string selects it, null disables any default, absent (undefined) inherits from `parent` when
   * given, else takes `defaultEnvironmentId` (the composition's configured default), else none.
   * workspaceId: a string selects it, null selects none, absent inherits from `parent`.
   */
  'session.created': z.strictObject({
    scope: z.string().min(1),
    environmentId: environmentSelectionSchema.optional(),
    workspaceId: resourceIdSchema.nullable().optional(),
    /** The workspace's binding generation when it was selected (a later generation makes the session stale). */
    workspaceGeneration: z.number().int().positive().optional(),
    /** Where the session's commands and tools start, relative to the workspace root ('' the root). */
    cwd: sessionCwdSchema.optional(),
    defaultEnvironmentId: environmentSelectionSchema.optional(),
    /** The environment was selected from a profile by this reuse policy (a `session` one belongs to this session). */
    environmentReuse: reusePolicySchema.optional(),
    parent: z
      .strictObject({
        sessionId: resourceIdSchema,
        relation: z.enum(['child', 'fork']),
        environmentId: environmentSelectionSchema,
        workspaceId: resourceIdSchema.nullable(),
        workspaceGeneration: z.number().int().positive().optional(),
        cwd: sessionCwdSchema.optional(),
      })
      .optional(),
    at: atSchema,
  }),
  /** `previous` is the selection the caller observed; it must still be current. */
  'session.environment_changed': z.strictObject({
    previous: environmentSelectionSchema,
    next: environmentSelectionSchema,
    at: atSchema,
  }),
  /** The session is gone: nothing more runs in it (its executions and turns keep their own records). */
  'session.deleted': z.strictObject({ at: atSchema }),
};

export type SessionEvent = EventUnion<typeof sessionEvents>;
