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
import type { RuntimeIdentity } from './actor-type.ts';

export const ACTOR_ADOPTED = 'actor.adopted';

export const actorAdoptedSchema = z.object({
  /** The owner it was taken from (absent for an unowned actor). */
  from: z.string().optional(),
  to: z.string().min(1),
  /** The adopter's epoch. */
  epoch: z.number().int().nonnegative(),
  at: z.number().int().nonnegative(),
});

/** Who wrote a stream last: the owner, and the epoch (the start of it) that wrote. */
export interface Ownership {
  /** Undefined while no runtime has written the stream. */
  owner?: string;
  ownerEpoch?: number;
}

/** The ownership after a stored event: its writer's, if a runtime wrote it. */
export const ownerAfter = (o: Ownership, metadata: { runtimeId?: unknown; epoch?: unknown }): Ownership =>
  typeof metadata.runtimeId === 'string'
    ? { owner: metadata.runtimeId, ...(typeof metadata.epoch === 'number' ? { ownerEpoch: metadata.epoch } : {}) }
    : o;

/**
 * Whether a runtime may write a stream: it owns it (or no runtime does), and no later start of itself wrote it: an
 * older process of the same runtime still alive (a copied data directory, a host thought dead) is fenced at write
 * time once the new one has touched the actor, as its recovery does to every unfinished one.
 */
export const mayWrite = (o: Ownership, identity: RuntimeIdentity): boolean =>
  o.owner === undefined || (o.owner === identity.runtimeId && (o.ownerEpoch ?? 0) <= identity.epoch);

/** The refusal of a non-owner; `url` (where the owner answers, when known) lets a client send the request there. */
export function ownedElsewhere(stream: string, o: Ownership, identity: RuntimeIdentity, url?: string): BerthError {
  const message =
    o.owner === identity.runtimeId
      ? `${stream} was written by a later start of this runtime (epoch ${o.ownerEpoch}); this process (epoch ${identity.epoch}) is stale`
      : `${stream} is owned by runtime ${o.owner}; send the request there`;
  return new BerthError('owned_elsewhere', message, { stream, runtimeId: o.owner, epoch: o.ownerEpoch ?? null, ...(url ? { url } : {}) });
}
