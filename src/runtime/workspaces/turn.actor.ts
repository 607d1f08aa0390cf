/** The turn actor type: serialized tool work on one storage, driven by the turn service; no effects. */
import { turnEvents } from '../../../schemas/events/turn.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { finished, reject, turnMachine } from '../../machines/turn.machine.ts';
import type { Services } from '../services.ts';

export const turnActor = defineActor<typeof turnMachine, Services>({
  type: 'turn',
  machine: turnMachine,
  input: (id) => ({ id }),
  events: turnEvents,
  finished,
  reject,
  effects: {},
});
