/** The storage ownership actor type: one holder at a time, decided by the stream's optimistic concurrency; no effects. */
import { ownershipEvents } from '../../../schemas/events/ownership.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { finished, ownershipMachine, reject } from '../../machines/ownership.machine.ts';
import type { Services } from '../services.ts';

export const ownershipActor = defineActor<typeof ownershipMachine, Services>({
  type: 'ownership',
  machine: ownershipMachine,
  input: (id) => ({ id }),
  events: ownershipEvents,
  finished,
  reject,
  effects: {},
});
