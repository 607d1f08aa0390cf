/**
 * The environment actor type: its machine, events, and its effects: creating the allocation actor (or claiming a
 * warm pool's), creating a build actor, and reconciling a build under way after a restart.
 */
import { environmentEvents } from '../../../schemas/events/environment.ts';
import {
  environmentMachine,
  finished,
  reject,
  type AllocationIntendParams,
  type BuildReconcileParams,
  type BuildStartParams,
} from '../../machines/environment.machine.ts';
import { INTERRUPTED } from '../../machines/build.machine.ts';
import { defineActor, type DomainEvent } from '../../actors/actor-type.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import { buildIdOf } from '../builds/content-runtime.ts';
import type { Services } from '../services.ts';
import { allocationContent } from '../executions/version-exec.ts';
import { claimPooled } from '../pools/pool-claim.ts';
import { missedNotice } from './allocation.actor.ts';

export const environmentActor = defineActor<typeof environmentMachine, Services>({
  type: 'environment',
  machine: environmentMachine,
  input: (id) => ({ id }),
  events: environmentEvents,
  finished,
  reject,
  effects: {
    /**
     * Re-sent by recovery: an allocation that already exists tells what this environment may have missed. The intent
     * records its provider's ownership, and, where the provider binds content at allocation, the content version it
     * binds (version-exec.ts: read when the intent is written). A warm pool's allocation is claimed (pool-claim.ts).
     */
    'allocation.intend': async (p: AllocationIntendParams, ctx) => {
      if (p.pooled) return claimPooled(p, ctx);
      const { allocationId, pooled: _intended, reflected: _known, ...intent } = p;
      const { ownership } = ctx.services.providers.get(p.profile.provider);
      const content = await allocationContent(ctx.services, p.environmentId, p.profile);
      try {
        await ctx.send('allocation', allocationId, { type: 'allocation.intended', ...intent, ownership, ...content, at: ctx.services.now() });
      } catch (e) {
        const missed = missedNotice(e);
        if (missed && missed.type !== p.reflected) return missed;
        if (!isBerthError(e, 'invalid_state')) throw e;
      }
    },
    'build.start': async (p: BuildStartParams, ctx) => {
      try {
        await ctx.send('build', buildIdOf(p.environmentId, p.version), {
          type: 'build.requested',
          ...p,
          runtimeId: ctx.runtime.runtimeId,
          epoch: ctx.runtime.epoch,
          at: ctx.services.now(),
        });
      } catch (e) {
        if (!isBerthError(e, 'invalid_state')) throw e;
      }
    },
    /** Never starts the build: one that never got its request is failed; a finished one's missed outcome is told. */
    'build.reconcile': async (p: BuildReconcileParams, ctx): Promise<DomainEvent | undefined> => {
      const build = await ctx.services.content?.build(buildIdOf(p.environmentId, p.version));
      if (build?.state === 'building') return undefined;
      const c = build?.state === 'ready' || build?.state === 'failed' ? build.context : undefined;
      return {
        type: 'environment.build_finished',
        version: p.version,
        status: c && !c.error ? 'ready' : 'failed',
        error: c ? c.error : INTERRUPTED,
        packages: c?.packageCount ?? 0,
        sizeBytes: c?.sizeBytes ?? 0,
        ...(c ? { startedAt: c.startedAt } : {}),
        at: ctx.services.now(),
      };
    },
  },
});
