/**
 * `berth workspace create|ls|show|rm|history|clear`: the workspaces of the token's scope on a running server —
 * managed ones made on request, directory ones from the admin's mappings — and their file history.
 */
import type { HistoryEntry, Workspace } from '../client/berth-client.ts';
import { table } from './ps.ts';
import { remoteUsage } from './remote.ts';
import { subcommands } from './subcommands.ts';
import { writeLine } from './stdout-lines.ts';

export const workspaceUsage = `usage: berth workspace create [--name NAME]
       berth workspace ls
       berth workspace show WORKSPACE
       berth workspace rm WORKSPACE
       berth workspace history WORKSPACE
       berth workspace clear WORKSPACE
  create makes a managed workspace (a directory the server makes and owns) and prints its id; rm deletes it with its
  directory (refused while a turn holds it); history prints each tool mutation and each shell command's changes with
  the turn (and execution) that made them; clear (admin) frees a storage whose holder's work is proven stopped.
  Bind a session to a workspace with \`berth session create --workspace WORKSPACE\`. Common flag: --json.
${remoteUsage}`;

const describe = (w: Workspace) =>
  `${w.id}  ${w.kind}  ${w.name ?? '-'}  ${w.state}  generation ${w.generation}  ${w.holder ? `held by turn ${w.holder.turnId}` : 'free'}`;

const size = (stamp: { size: number } | null) => (stamp ? String(stamp.size) : '-');

/** One history entry as lines: its header, then one line per change (sizes before -> after, `-` for none). */
const historyLines = (h: HistoryEntry) => [
  `${h.revision}  ${new Date(h.at).toISOString()}  ${h.tool}  turn ${h.turnId}${h.executionId ? `  execution ${h.executionId}` : ''}`,
  ...h.changes.map((c) => `    ${c.kind}  ${c.path}  ${size(c.before)} -> ${size(c.after)}`),
  ...(h.truncated ? ['    (more changes than recorded)'] : []),
];

export const workspaceCommand = subcommands(workspaceUsage, { name: { type: 'string' } } as const, {
  create: {
    args: [],
    flags: ['name'],
    run: async (berth, _, values, print) => {
      const created = await berth.workspaces.create(values.name !== undefined ? { name: values.name } : {});
      await print(created, created.id);
    },
  },
  ls: {
    args: [],
    run: async (berth, _, values) => {
      const all = await berth.workspaces.list();
      if (values.json) for (const w of all) await writeLine(JSON.stringify(w));
      else await table(['WORKSPACE', 'KIND', 'NAME', 'STATE', 'HOLDER'], all.map((w) => [w.id, w.kind, w.name ?? '-', w.state, w.holder?.turnId ?? '-']));
    },
  },
  show: {
    args: ['WORKSPACE'],
    run: async (berth, [id], _, print) => {
      const workspace = await berth.workspaces.get(id!);
      await print(workspace, describe(workspace));
    },
  },
  rm: {
    args: ['WORKSPACE'],
    run: async (berth, [id]) => berth.workspaces.delete(id!),
  },
  history: {
    args: ['WORKSPACE'],
    run: async (berth, [id], values) => {
      for await (const h of berth.workspaces.iterateHistory(id!)) {
        if (values.json) await writeLine(JSON.stringify(h));
        else for (const line of historyLines(h)) await writeLine(line);
      }
    },
  },
  clear: {
    args: ['WORKSPACE'],
    run: async (berth, [id], _, print) => {
      const { cleared } = await berth.workspaces.clearHolder(id!);
      await print({ cleared }, cleared ? `cleared turn ${cleared}` : 'nobody held it');
    },
  },
});
