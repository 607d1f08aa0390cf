/**
 * `berth session create|show|rm`: sessions on a running server — an environment and/or a workspace (bound at its
 * current generation, commands starting in a cwd inside it). Creating one allocates nothing.
 */
import type { Session } from '../client/berth-client.ts';
import { UsageError } from './command-args.ts';
import { findEnvironment, remoteUsage } from './remote.ts';
import { subcommands } from './subcommands.ts';

export const sessionUsage = `usage: berth session create [--workspace WORKSPACE] [--env ENV] [--cwd DIR] [--parent SESSION [--fork]]
       berth session show SESSION
       berth session rm SESSION
  create prints the new session's id. --workspace binds it to a workspace (its tool turns and file tools work
  there: \`berth turn\`, \`berth cp\`); --cwd is where its commands start, relative to the workspace root; --env is
  the environment its commands run in (id, name or slug); --parent makes it a child (--fork: a fork) of a session,
  inheriting what it does not name. rm stops new turns and commands in it. Common flag: --json.
${remoteUsage}`;

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
        ...(values.env !== undefined ? { environmentId: await findEnvironment(berth, values.env) } : {}),
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
