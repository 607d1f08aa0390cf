/**
 * `berth session create|show|rm`: sessions on a running server — an environment and/or a workspace (bound at its
 * current generation, commands starting in a cwd inside it). Creating one allocates nothing.
 */
import type { Session } from '../client/berth-client.ts';
import { UsageError } from './command-args.ts';
import { subcommands } from './subcommands.ts';
import { sessionUsage } from './usage.ts';


const describe = (s: Session) =>
  [
    s.id,
    `environment ${s.environmentId ?? '-'}`,
    `workspace ${s.workspaceId ? `${s.workspaceId} (generation ${s.workspaceGeneration})` : '-'}`,
    `cwd /${s.cwd}`,
    ...(s.parentId ? [`${s.relation} of ${s.parentId}`] : []),
  ].join('  ');

const options = {
  workspace: { type: 'string' },
  env: { type: 'string' },
  cwd: { type: 'string' },
  parent: { type: 'string' },
  fork: { type: 'boolean' },
} as const;

export const sessionCommand = subcommands(sessionUsage, options, {
  create: {
    args: [],
    flags: ['workspace', 'env', 'cwd', 'parent', 'fork'],
    run: async (berth, _, values, print) => {
      if (values.fork && values.parent === undefined) throw new UsageError('--fork needs --parent', sessionUsage);
      const session = await berth.sessions.create({
        ...(values.env !== undefined ? { environmentId: values.env } : {}),
        ...(values.workspace !== undefined ? { workspaceId: values.workspace } : {}),
        ...(values.cwd !== undefined ? { cwd: values.cwd } : {}),
        ...(values.parent !== undefined ? { parentId: values.parent, relation: values.fork ? ('fork' as const) : ('child' as const) } : {}),
      });
      await print(session, session.id);
    },
  },
  show: {
    args: ['SESSION'],
    run: async (berth, [id], _, print) => {
      const session = await berth.sessions.get(id!);
      await print(session, describe(session));
    },
  },
  rm: {
    args: ['SESSION'],
    run: async (berth, [id]) => berth.sessions.delete(id!),
  },
});
