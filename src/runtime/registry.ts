/**
 * What this Berth is made of: the actor types and the read models the runtime registers. The CLI's `replay` finds an
 * actor type here by stream category. Adding a resource or a read model is one line in a list below.
 */
import type { ActorType } from '../actors/actor-type.ts';
import { activeAllocationsProjection } from '../projections/active-allocations.projection.ts';
import { activityProjection } from '../projections/activity.projection.ts';
import { catalogProjection } from '../projections/catalog.projection.ts';
import { harnessesProjection } from '../projections/harnesses.projection.ts';
import type { Projection } from '../projections/projection.ts';
import { allocationActor } from './environments/allocation.actor.ts';
import { buildActor } from './builds/build.actor.ts';
import { environmentActor } from './environments/environment.actor.ts';
import { executionActor } from './executions/execution.actor.ts';
import { harnessActor } from './builds/harness.actor.ts';
import { sessionActor } from './executions/session.actor.ts';
import { ownershipActor } from './workspaces/ownership.actor.ts';
import { turnActor } from './workspaces/turn.actor.ts';
import { workspaceActor } from './workspaces/workspace.actor.ts';
import { mountActor } from './workspaces/mount.actor.ts';
import { leaseActor } from './leases/lease.actor.ts';
import { leasesProjection } from '../projections/leases.projection.ts';
import { workspacesProjection } from '../projections/workspaces.projection.ts';

export const actorTypes: ActorType[] = [
  environmentActor,
  allocationActor,
  sessionActor,
  executionActor,
  buildActor,
  harnessActor,
  workspaceActor,
  ownershipActor,
  turnActor,
  mountActor,
  leaseActor,
];

export const projections: Projection[] = [catalogProjection, activeAllocationsProjection, activityProjection, harnessesProjection, workspacesProjection, leasesProjection];

/** The registered actor type whose streams are `<type>-…` for this stream, the longest type name winning. */
export function actorTypeOfStream(stream: string, types: ActorType[] = actorTypes): ActorType | undefined {
  return types
    .filter((t) => stream.startsWith(`${t.type}-`))
    .sort((a, b) => b.type.length - a.type.length)[0];
}
