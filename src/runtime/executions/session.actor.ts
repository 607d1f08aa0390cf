/** The session actor type: a selection of Environment and Workspace; it has no effects (selecting allocates nothing). */
import { sessionEvents } from '../../../schemas/events/session.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { sessionMachine, finished, reject } from '../../machines/session.machine.ts';
import type { Services } from '../services.ts';

export const sessionActor = defineActor<typeof sessionMachine, Services>({
  type: 'session',
  machine: sessionMachine,
  input: (id) => ({ id }),
  events: sessionEvents,
  finished,
  reject,
  effects: {},
});
