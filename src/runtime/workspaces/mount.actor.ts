/** The mount actor type: a workspace's view on an allocation; its effects are the MountService's (mount-service.ts). */
import { mountEvents } from '../../../schemas/events/mount.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { crashAt } from '../../providers/crash-point.ts';
import { mountMachine, reject, type BeginSaveParams, type CaptureParams, type MaterializeParams, type UnuseParams } from '../../machines/mount.machine.ts';
import type { Services } from '../services.ts';

export const mountActor = defineActor<typeof mountMachine, Services>({
  type: 'mount',
  machine: mountMachine,
  input: (id) => ({ id }),
  events: mountEvents,
  reject,
  effects: {
    'mount.materialize': async (p: MaterializeParams, ctx) => {
      const event = await ctx.services.mounts.materialize(p);
      crashAt('mount.materialized'); // recovery tests: the view is filled, `prepared` is not yet durable
      return event;
    },
    'mount.capture': async (p: CaptureParams, ctx) => {
      const events = await ctx.services.mounts.capture(p);
      crashAt('mount.captured'); // the attempt is published (or not) on the workspace, its outcome not yet recorded here
      return events;
    },
    'mount.begin_save': (p: BeginSaveParams, ctx) => ctx.services.mounts.beginSave(p),
    'mount.unuse': async (p: UnuseParams, ctx) => {
      const event = await ctx.services.mounts.unuse(p);
      crashAt('mount.unused'); // the allocation's use is given back, `detached` is not yet durable
      return event;
    },
  },
});
