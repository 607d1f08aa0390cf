/** The lease actor type: a unit of work and its machine; removing the private environment of a released lease is its effect. */
import { leaseEvents } from '../../../schemas/events/lease.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { leaseMachine, reject, type RemoveParams } from '../../machines/lease.machine.ts';
import type { Services } from '../services.ts';

export const leaseActor = defineActor<typeof leaseMachine, Services>({
  type: 'lease',
  machine: leaseMachine,
  input: (id) => ({ id }),
  events: leaseEvents,
  finished: (snapshot) => snapshot.status === 'done',
  reject,
  effects: {
    // Before the API exists (recovery at start) nothing is done here: the maintenance loop finishes the release.
    'lease.remove': async (p: RemoveParams, ctx) => {
      if (!ctx.services.leases) return undefined;
      await ctx.services.leases.remove(p.scope, p.environmentId);
      return { type: 'lease.released', at: ctx.services.now() };
    },
  },
});
