/**
 * Who may write an actor's stream when several runtimes share one store (issue #17): its owner, the runtime that
 * wrote its latest event. The runtime that creates an actor owns it; another takes it over only by appending
 * `actor.adopted` at the stream's exact revision (after the owner was retired), so the old owner's next append
 * finds the stream moved, folds the adoption and drops the actor without running an effect: fencing at write time.
 * An event written by no runtime (no `runtimeId` in its metadata: imported or hand-written) leaves the actor
 * unowned, and the next runtime to write it becomes its owner.
 */
import { z } from 'zod';
import { BerthError } from '../../schemas/errors.ts';

export const ACTOR_ADOPTED = 'actor.adopted';

export const actorAdoptedSchema = z.object({
  /** The owner it was taken from (absent for an unowned actor). */
  from: z.string().optional(),
  to: z.string().min(1),
  /** The adopter's epoch. */
  epoch: z.number().int().nonnegative(),
  at: z.number().int().nonnegative(),
});

/** The owner after a stored event: the runtime that wrote it, if any wrote it. */
export const ownerAfter = (owner: string | undefined, metadata: { runtimeId?: unknown }): string | undefined =>
  typeof metadata.runtimeId === 'string' ? metadata.runtimeId : owner;

/** Whether `runtimeId` may write a stream whose owner is `owner`. */
export const mayWrite = (owner: string | undefined, runtimeId: string): boolean => owner === undefined || owner === runtimeId;

/** The refusal of a non-owner; `url` (where the owner answers, when known) lets a client send the request there. */
export function ownedElsewhere(stream: string, owner: string, url?: string): BerthError {
  return new BerthError('owned_elsewhere', `${stream} is owned by runtime ${owner}; send the request there`, {
    stream,
    runtimeId: owner,
    ...(url ? { url } : {}),
  });
}
