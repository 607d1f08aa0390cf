/** The harness actor type: a catalog record with no effects. */
import { harnessEvents } from '../../../schemas/events/harness.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { harnessMachine, reject } from '../../machines/harness.machine.ts';
import type { Services } from '../services.ts';

export const harnessActor = defineActor<typeof harnessMachine, Services>({
  type: 'harness',
  machine: harnessMachine,
  input: (id) => ({ id }),
  events: harnessEvents,
  reject,
  effects: {},
});
