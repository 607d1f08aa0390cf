/**
 * What the maintenance loop does every tick (seed 000): reconcile unfinished allocations by inspecting them,
 * reclaim managed allocations idle past their interval (borrowed ones and those with uses stay), and reconcile
 * executions whose lifecycle stalled after their command exited. Each sends events carrying the time it read;
 * a refusal only means the actor moved on meanwhile.
 */
import { isBerthError } from '../../schemas/errors.ts';
import type { ActorRuntime } from '../actors/actor-runtime.ts';
import { reclaimableAt, type AllocationSnapshot } from '../machines/allocation.machine.ts';
import type { ActiveAllocation } from '../projections/active-allocations.projection.ts';
import type { ActivityEntry } from '../projections/activity.projection.ts';
import type { ProjectionEngine } from '../projections/projection-engine.ts';
import type { MaintenanceTask } from './maintenance-loop.ts';

export interface MaintenanceParts {
  actors: () => ActorRuntime<any>;
  projections: () => ProjectionEngine;
  /** An execution whose step has not moved for this long after exit is reconciled again. */
  stalledMs?: number;
}

const RECONCILED_STATES = new Set(['ready', 'pending', 'unknown', 'releasing']);
const POST_EXIT_STEPS = new Set(['exited', 'drained', 'saved', 'closing']);

async function tolerate(send: Promise<unknown>): Promise<void> {
  try {
    await send;
  } catch (e) {
    if (!isBerthError(e)) throw e;
  }
}

export function maintenanceTasks(parts: MaintenanceParts): MaintenanceTask[] {
  const active = () => parts.projections().get('active-allocations')!.query.list() as ActiveAllocation[];
  return [
    {
      name: 'reconcile-allocations',
      async run(now) {
        for (const a of active()) {
          if (!RECONCILED_STATES.has(a.state)) continue;
          await tolerate(parts.actors().send('allocation', a.allocationId, { type: 'allocation.reconcile_requested', at: now.getTime() }));
        }
      },
    },
    {
      name: 'reclaim-idle-allocations',
      async run(now) {
        for (const a of active()) {
          const view = await parts.actors().get('allocation', a.allocationId);
          if (!view) continue;
          const at = reclaimableAt({ value: view.state, context: view.context } as unknown as AllocationSnapshot);
          if (at === null || at > now.getTime()) continue;
          await tolerate(parts.actors().send('allocation', a.allocationId, { type: 'allocation.release_requested', reason: 'idle', at: now.getTime() }));
        }
      },
    },
    {
      name: 'reconcile-executions',
      async run(now) {
        const actors = parts.actors();
        const stalledMs = parts.stalledMs ?? 30_000;
        const unfinished = parts.projections().get('activity')!.query.unfinished() as ActivityEntry[];
        for (const x of unfinished) {
          if (!POST_EXIT_STEPS.has(x.step) || now.getTime() - x.updatedAt < stalledMs) continue;
          await tolerate(actors.send('execution', x.id, { type: 'runtime.recovered', runtimeId: actors.runtimeId, epoch: actors.epoch, at: now.getTime() }));
        }
      },
    },
  ];
}
