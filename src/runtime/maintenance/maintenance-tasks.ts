/**
 * What the maintenance loop does every tick (seed 000): reclaim managed allocations idle past their interval
 * (borrowed ones and those with uses stay), reconcile allocations (inspect uncertain ones, retry releases, resume a
 * verified partial one under its original intent, and look at ready managed ones for loss or a new incarnation), and
 * reconcile executions whose lifecycle stalled after their command exited, and give back execution uses that no
 * execution holds (taken alongside an acceptance that never landed). Each sends events carrying the time it
 * read; a refusal only means the actor moved on meanwhile. Also the startup step that settles the active-allocation index before the runtime admits work.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { isBerthError } from '../../../schemas/errors.ts';
import type { ActorRuntime } from '../../actors/actor-runtime.ts';
import { reclaimableAt, type AllocationContext } from '../../machines/allocation.machine.ts';
import type { ActiveAllocation } from '../../projections/active-allocations.projection.ts';
import type { ActivityEntry } from '../../projections/activity.projection.ts';
import type { CatalogEntry } from '../../projections/catalog.projection.ts';
import type { ProjectionEngine } from '../../projections/projection-engine.ts';
import type { MaintenanceTask } from './maintenance-loop.ts';
import type { ProviderRegistry } from '../provider-registry.ts';

export interface MaintenanceParts {
  actors: () => ActorRuntime<any>;
  projections: () => ProjectionEngine;
  providers: ProviderRegistry;
  /** An execution whose step has not moved for this long after exit is reconciled again. */
  stalledMs?: number;
  /** An execution use whose execution was never accepted is given back this long after it was taken. */
  orphanedUseMs?: number;
}

const POST_EXIT_STEPS = new Set(['exited', 'drained', 'saved', 'closing']);

async function tolerate(send: Promise<unknown>): Promise<void> {
  try {
    await send;
  } catch (e) {
    if (!isBerthError(e)) throw e;
  }
}

const activeIndex = (projections: ProjectionEngine) =>
  projections.get('active-allocations')!.query.list() as ActiveAllocation[];

export function maintenanceTasks(parts: MaintenanceParts): MaintenanceTask[] {
  const active = () => activeIndex(parts.projections());
  const send = (allocationId: string, type: string, now: Date) =>
    tolerate(parts.actors().send('allocation', allocationId, { type, at: now.getTime() }));
  /**
   * Looks at a ready allocation without writing anything: only a report that may change it (absent, fenced, another
   * incarnation) goes through the actor, whose own inspection records it. Unchanged observations append no events.
   */
  const changed = async (a: ActiveAllocation): Promise<boolean> => {
    const view = await parts.actors().get<AllocationContext>('allocation', a.allocationId);
    if (!view || !parts.actors().owns(view) || view.state !== 'ready' || view.context.call !== null) return false;
    const { requestId, environmentId, identity, profile, generation } = view.context;
    try {
      // A borrowed machine never goes away, unless its provider's machines can be replaced (another incarnation).
      if (view.context.ownership === 'borrowed' && !parts.providers.get(profile.provider).replaceable) return false;
      const ref = { requestId, allocationId: a.allocationId, environmentId, generation, profile, ...(identity ? { identity } : {}) };
      const report = await parts.providers.get(profile.provider).inspect(ref);
      if (report.status === 'ready') return report.identity.incarnation !== identity?.incarnation;
      return report.status !== 'unknown' && report.status !== 'pending';
    } catch {
      return false; // provider missing or failing: an uncertain look proves nothing
    }
  };
  return [
    // Before reconciliation: an inspection it starts is a call in flight, which keeps an allocation unreclaimable
    // until it answers.
    {
      name: 'reclaim-idle-allocations',
      async run(now) {
        for (const a of active()) {
          const view = await parts.actors().get<AllocationContext>('allocation', a.allocationId);
          // Another runtime's allocations (a shared store) are its own to reclaim and reconcile.
          if (!view || !parts.actors().owns(view)) continue;
          const at = reclaimableAt(view);
          if (at === null || at > now.getTime()) continue;
          await tolerate(
            parts.actors().send('allocation', a.allocationId, { type: 'allocation.release_requested', reason: 'idle', at: now.getTime() }),
          );
        }
      },
    },
    {
      name: 'reconcile-allocations',
      async run(now) {
        for (const a of active()) {
          // A partial allocation (created, never started or admitted) is finished under its original intent.
          if (a.state === 'pending') await send(a.allocationId, 'allocation.resume_requested', now);
          else if (a.state === 'unknown' || a.state === 'releasing') await send(a.allocationId, 'allocation.reconcile_requested', now);
          else if (a.state === 'ready' && (await changed(a))) await send(a.allocationId, 'allocation.reconcile_requested', now);
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
          // A slow drain or save still running here is not stalled: re-driving it would run it twice at once.
          if (actors.effectRunning('execution', x.id)) continue;
          await tolerate(actors.send('execution', x.id, { type: 'runtime.recovered', runtimeId: actors.runtimeId, epoch: actors.epoch, at: now.getTime() }));
        }
      },
    },
    {
      // An execution's use is taken alongside its acceptance (the use id is the execution id). If the acceptance
      // never landed (a crash between the two, a lost race), or the execution ended without giving it back, nothing
      // else would ever release it, and the allocation could never be reclaimed or released.
      name: 'release-orphaned-uses',
      async run(now) {
        const actors = parts.actors();
        const graceMs = parts.orphanedUseMs ?? 60_000;
        for (const a of active()) {
          const allocation = await actors.get<AllocationContext>('allocation', a.allocationId);
          if (!allocation || !actors.owns(allocation)) continue;
          const uses = allocation.context.uses ?? {};
          for (const [useId, use] of Object.entries(uses)) {
            if (use.kind !== 'execution') continue;
            const x = await actors.get('execution', useId).catch(() => undefined);
            const orphaned = x === undefined || x.state === 'pristine' ? now.getTime() - use.at >= graceMs : x.finished;
            if (orphaned) await tolerate(actors.send('allocation', a.allocationId, { type: 'allocation.use_released', useId, at: now.getTime() }));
          }
        }
      },
    },
  ];
}

/**
 * Recovery reconciles the active-allocation index before admitting work: waits (up to `timeoutMs`) until every
 * allocation it lists has had its recovery inspection (or deallocation) answered, resumes once each one found
 * partial, until every environment has heard the outcome, and catches the read models up with what that wrote. An allocation whose provider does not answer in time stays
 * in flight; maintenance keeps at it, and admission refuses it meanwhile.
 */
/**
 * The environment has not yet heard what its allocation became: the intent recovery re-sends is not appended yet,
 * or the allocation settled and its notification is on its way.
 */
const awaitsNotification = (environment: string, allocation: unknown): boolean =>
  allocation === undefined ||
  (environment === 'acquiring' ? !['requested', 'pending', 'unknown'].includes(String(allocation)) : allocation === 'released');

export async function settleActiveAllocations(actors: ActorRuntime<any>, projections: ProjectionEngine, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const resumed = new Set<string>();
  for (;;) {
    await projections.catchUp();
    let unsettled = false;
    // A read model that failed on an event answers nothing: what it would list is left to maintenance after its
    // rebuild, and the start goes on (the other models serve).
    const [catalog, index] = [projections.get('catalog')!, projections.get('active-allocations')!];
    for (const e of (catalog.error ? [] : catalog.query.all()) as CatalogEntry[]) {
      if ((e.state === 'acquiring' || e.state === 'releasing') && e.allocationId) {
        if (awaitsNotification(e.state, (await actors.get('allocation', e.allocationId))?.state)) unsettled = true;
      }
    }
    for (const a of index.error ? [] : activeIndex(projections)) {
      const view = await actors.get<AllocationContext>('allocation', a.allocationId);
      if (view?.context.call != null) unsettled = true;
      else if (view?.state === 'pending' && !resumed.has(a.allocationId)) {
        resumed.add(a.allocationId);
        unsettled = true;
        await tolerate(actors.send('allocation', a.allocationId, { type: 'allocation.resume_requested', at: Date.now() }));
      }
    }
    if (!unsettled || Date.now() >= deadline) return;
    await sleep(10);
  }
}
