/**
 * `berth ps [-a]`: what is live on the server, in the caller's scope — the active allocations and the executions
 * that have not finished (with -a, every execution, finished ones too, with their exit status) — as two tables
 * naming each environment, or one JSON object per line with --json.
 */
import type { ExecutionRecordJson } from '../../schemas/api.ts';
import { terminalStatuses } from '../../schemas/states.ts';
import type { Allocation } from '../client/berth-client.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { exitStatusOf } from './exit-status.ts';
import { remoteOptions, withServer } from './remote.ts';
import { writeLine } from './stdout-lines.ts';
import { table } from './text-table.ts';
import { psUsage } from './usage.ts';


export async function psCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, { ...remoteOptions, json: { type: 'boolean' }, all: { type: 'boolean', short: 'a' } }, psUsage);
  if (values.help) return void console.log(psUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, psUsage);
  const [allocations, executions, names] = await withServer(values, async (berth) => {
    const unfinished = () => Promise.all([berth.executions.list({ status: 'accepted' }), berth.executions.list({ status: 'running' })]).then((x) => x.flat());
    return Promise.all([
      berth.allocations.active(),
      values.all ? berth.executions.list() : unfinished(),
      values.json ? new Map<string, string>() : berth.environments.list().then((list) => new Map(list.map((e) => [e.id, e.name]))),
    ] as const);
  });
  executions.sort((a, b) => a.createdAt - b.createdAt);
  if (values.json) {
    for (const a of allocations) await writeLine(JSON.stringify({ kind: 'allocation', ...a }));
    for (const e of executions) await writeLine(JSON.stringify({ kind: 'execution', ...e }));
    return 0;
  }
  const named = (id: string) => names.get(id) ?? id;
  await table(
    ['ALLOCATION', 'ENVIRONMENT', 'GEN', 'STATE', 'PROVIDER', 'USES'],
    allocations.map((a: Allocation) => [a.allocationId, named(a.environmentId), String(a.generation), a.state, `${a.provider}/${a.ownership}`, String(a.uses.length)]),
  );
  await writeLine('');
  const now = Date.now();
  await table(
    ['EXECUTION', 'STATUS', 'ENVIRONMENT', 'AGE', 'COMMAND'],
    executions.map((e) => [e.id, statusText(e), named(e.environment), age(now - e.createdAt), e.command.join(' ').slice(0, 60)]),
  );
  return 0;
}

/** A finished execution's status with the exit code the CLI would pass through (`exited 3`, `cancelled 130`). */
function statusText(e: ExecutionRecordJson): string {
  return terminalStatuses.has(e.status) ? `${e.status} ${exitStatusOf(e).code}` : e.status;
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${s % 60}s` : `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
}
