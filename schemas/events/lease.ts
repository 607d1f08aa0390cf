/**
 * Events of the lease stream (`lease-<hlse_…>`, issue 15, seed 003, DESIGN §10): a unit of work (`work: {kind, id}`)
 * bound to a machine it acquires lazily. The lease owns a private environment (made at its first acquire, from the
 * profile it was bound with), so it never has two machines: the environment's one allocation is the lease's machine.
 * A pause (with a timer to `retryAt`) or a hold (no timer) keeps the lease; a pause that outlasts the idle interval
 * has the machine reclaimed (its workspace view saved first); a resume brings the work back, on a new machine if the
 * old one went.
 */
import { z } from 'zod';
import { profileSchema } from '../profile.ts';
import { environmentIdSchema, resourceIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema, runtimeRecoveredSchema } from './runtime.ts';

export const leaseKeySchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$/, 'expected 1-200 letters, digits, dots, colons, dashes or underscores');
export const workSchema = z.strictObject({ kind: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/), id: z.string().min(1).max(256) });
export const pauseCauseSchema = z.strictObject({
  kind: z.string().regex(/^[a-z][a-z0-9_]{0,63}$/),
  message: z.string().max(1000).optional(),
});

export const leaseEvents = {
  'lease.bound': z.strictObject({
    scope: z.string().min(1),
    /** The binder's role: what its timer's retries and its environment's making act as (a member's stay under its quotas). */
    role: z.enum(['admin', 'member']).optional(),
    key: leaseKeySchema,
    work: workSchema,
    /** The profile its machine is made from (its private environment's). */
    profile: profileSchema,
    workspaceId: resourceIdSchema.optional(),
    /** Variables every command run through the lease gets (the caller's own, checked like an execution's env). */
    env: z.record(z.string(), z.string()).optional(),
    /** How long a pause may last before the machine is reclaimed. */
    idleSeconds: z.number().int().min(0).max(31_536_000),
    at: atSchema,
  }),
  /** The private environment made at the first acquire (and the session on the workspace, when there is one). */
  'lease.environment_made': z.strictObject({ environmentId: environmentIdSchema, sessionId: resourceIdSchema.optional(), at: atSchema }),
  /** The machine an acquire found or made (its allocation and generation). */
  'lease.acquired': z.strictObject({ allocationId: resourceIdSchema, generation: z.number().int().positive(), at: atSchema }),
  /** The work paused: `retryAt` sets a timer that resumes it (persisted: a restart keeps the original time). */
  'lease.paused': z.strictObject({ cause: pauseCauseSchema, retryAt: atSchema.optional(), at: atSchema }),
  /**
   * The lease's deadline (a sandbox's timeout): at `deadline` (ms since the epoch) the maintenance loop releases it
   * unless a later one replaced it; null clears it. Persisted: a restart keeps it.
   */
  'lease.deadline_set': z.strictObject({ deadline: atSchema.nullable(), at: atSchema }),
  /** A person holds the work: the timer stops; only a resume ends it. */
  'lease.held': z.strictObject({ at: atSchema }),
  'lease.resumed': z.strictObject({ by: z.enum(['request', 'timer']), at: atSchema }),
  /** The pause outlasted the idle interval: the machine was released (its workspace view saved first). */
  'lease.reclaimed': z.strictObject({ allocationId: resourceIdSchema, at: atSchema }),
  /** The work is done: the machine and the private environment are removed (the view saved first). */
  'lease.release_requested': z.strictObject({ at: atSchema }),
  'lease.released': z.strictObject({ at: atSchema }),
  'runtime.recovered': runtimeRecoveredSchema,
};

export type LeaseEvent = EventUnion<typeof leaseEvents>;
export type Work = z.infer<typeof workSchema>;
export type PauseCause = z.infer<typeof pauseCauseSchema>;
