/** The environment actor type: its machine, events, and the one effect it has (creating the allocation actor). */
import { environmentEvents } from '../../../schemas/events/environment.ts';
import { environmentMachine, finished, reject, type AllocationIntendParams } from '../../machines/environment.machine.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import type { Services } from '../services.ts';

export const environmentActor = defineActor<typeof environmentMachine, Services>({
  type: 'environment',
  machine: environmentMachine,
  input: (id) => ({ id }),
  events: environmentEvents,
  finished,
  reject,
  effects: {
    /** Re-sent by recovery: an allocation that already exists tells what this environment may have missed. */
    'allocation.intend': async (p: AllocationIntendParams, ctx) => {
      const { allocationId, ...intent } = p;
      try {
        await ctx.send('allocation', allocationId, { type: 'allocation.intended', ...intent, at: ctx.services.now() });
      } catch (e) {
        const missed = isBerthError(e, 'invalid_state') ? e.detail.environmentEvent : undefined;
        if (missed && typeof missed === 'object') return missed as { type: string };
        if (!isBerthError(e, 'invalid_state')) throw e;
      }
    },
  },
});
