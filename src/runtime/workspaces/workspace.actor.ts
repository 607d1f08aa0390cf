/** The workspace actor type: a storage identity and its file history; removing a deleted managed directory is its one effect. */
import { workspaceEvents } from '../../../schemas/events/workspace.ts';
import { defineActor } from '../../actors/actor-type.ts';
import { reject, workspaceMachine, type RemoveDirectoryParams } from '../../machines/workspace.machine.ts';
import type { Services } from '../services.ts';

export const workspaceActor = defineActor<typeof workspaceMachine, Services>({
  type: 'workspace',
  machine: workspaceMachine,
  input: (id) => ({ id }),
  events: workspaceEvents,
  reject,
  effects: {
    'workspace.remove_directory': async (p: RemoveDirectoryParams, ctx) => {
      // Berth never owned a directory workspace's root: only a managed one's directory goes.
      if (p.kind === 'managed') await ctx.services.workspaces.removeManaged(p.workspaceId);
      return { type: 'workspace.removed', at: ctx.services.now() };
    },
  },
});
