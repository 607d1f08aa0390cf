/**
 * `berth workspace create|ls|show|rm|history|clear|checkpoints|checkpoint|diff|mount|detach`: the workspaces of the
 * token's scope on a running server — managed ones made on request, directory ones from the admin's mappings — their
 * file history, their published checkpoints (a tree each, a diff between two) and their view.
 */
import type { CheckpointDiff, HistoryEntry, Mount, Workspace } from '../client/berth-client.ts';
import { table } from './text-table.ts';
import { subcommands } from './subcommands.ts';
import { writeLine } from './stdout-lines.ts';
import { workspaceUsage } from './usage.ts';


const describe = (w: Workspace) =>
  `${w.id}  ${w.kind}  ${w.name ?? '-'}  ${w.state}  generation ${w.generation}  ${w.holder ? `held by turn ${w.holder.turnId}` : 'free'}`;

const size = (stamp: { size: number } | null) => (stamp ? String(stamp.size) : '-');

/** One history entry as lines: its header, then one line per change (sizes before -> after, `-` for none). */
const historyLines = (h: HistoryEntry) => [
  `${h.revision}  ${new Date(h.at).toISOString()}  ${h.tool}  turn ${h.turnId}${h.executionId ? `  execution ${h.executionId}` : ''}`,
  ...h.changes.map((c) => `    ${c.kind}  ${c.path}  ${size(c.before)} -> ${size(c.after)}`),
  ...(h.truncated ? ['    (more changes than recorded)'] : []),
];

const describeMount = (m: Mount) =>
  `${m.workspaceId}  ${m.state}  mount generation ${m.mountGeneration}  revision ${m.revision ?? '-'}` +
  (m.target ? `  on ${m.target.environmentId}/${m.target.allocationId} (generation ${m.target.generation})` : '') +
  (m.pins.length > 0 ? `  pinned by ${m.pins.join(', ')}` : '') +
  (m.problem ? `  ${m.problem.code}: ${m.problem.message}` : '');

const SIGNS = { added: '+', removed: '-', modified: 'M' } as const;
const diffLine = (c: CheckpointDiff['changes'][number]) => `${SIGNS[c.before === null ? 'added' : c.after === null ? 'removed' : 'modified']} ${c.path}`;
const truncatedLine = '(truncated: more entries than the server lists)';

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
  checkpoints: {
    args: ['WORKSPACE'],
    run: async (berth, [id], values) => {
      const all = await berth.workspaces.checkpoints(id!);
      if (values.json) for (const c of all) await writeLine(JSON.stringify(c));
      else await table(['CHECKPOINT', 'REVISION', 'REASON', 'FILES', 'BYTES', 'AT'], all.map((c) => [c.id, String(c.revision), c.reason, String(c.files), String(c.bytes), new Date(c.at).toISOString()]));
    },
  },
  checkpoint: {
    args: ['WORKSPACE', 'CHECKPOINT'],
    run: async (berth, [id, checkpointId], values) => {
      const tree = await berth.workspaces.checkpoint(id!, checkpointId!);
      if (values.json) return void (await writeLine(JSON.stringify(tree)));
      await writeLine(`${tree.id}  revision ${tree.revision}  ${tree.reason}  ${tree.files} file(s)  ${tree.bytes} bytes`);
      for (const e of tree.entries) await writeLine(`${e.type.padEnd(9)}  ${e.mode.toString(8).padStart(4, '0')}  ${String(e.size).padStart(10)}  ${e.path}${e.target !== undefined ? ` -> ${e.target}` : ''}`);
      if (tree.truncated) await writeLine(truncatedLine);
    },
  },
  diff: {
    args: ['WORKSPACE', 'FROM', 'TO'],
    run: async (berth, [id, from, to], values) => {
      const diff = await berth.workspaces.diff(id!, from!, to!);
      if (values.json) return void (await writeLine(JSON.stringify(diff)));
      for (const change of diff.changes) await writeLine(diffLine(change));
      if (diff.truncated) await writeLine(truncatedLine);
    },
  },
  mount: {
    args: ['WORKSPACE'],
    run: async (berth, [id], _, print) => {
      const mount = await berth.workspaces.mount(id!);
      await print(mount, describeMount(mount));
    },
  },
  detach: {
    args: ['WORKSPACE'],
    run: async (berth, [id], _, print) => {
      const mount = await berth.workspaces.detach(id!);
      await print(mount, describeMount(mount));
    },
  },
});
