/**
 * `berth ps`: what is live on a running server, in the caller's scope — the active allocations and the executions
 * that have not finished — as two small tables, or one JSON object per line with --json.
 */
import type { ExecutionRecordJson } from '../../schemas/api.ts';
import type { Allocation } from '../client/berth-client.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { connectRemote, isUnreachable, remoteOptions, remoteUsage, serverUrl, unreachable } from './remote.ts';
import { writeLine } from './stdout-lines.ts';

export const psUsage = `usage: berth ps [--json] [--url URL] [--token TOKEN]
  Lists the active allocations and the unfinished executions of the token's scope.
${remoteUsage}`;

export async function psCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, { ...remoteOptions, json: { type: 'boolean' } }, psUsage);
  if (values.help) return void console.log(psUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, psUsage);
  const berth = await connectRemote(values);
  let allocations: Allocation[];
  let executions: ExecutionRecordJson[];
  try {
    [allocations, executions] = await Promise.all([
      berth.allocations.active(),
      Promise.all([berth.executions.list({ status: 'accepted' }), berth.executions.list({ status: 'running' })]).then((x) => x.flat()),
    ]);
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(serverUrl(values.url), error);
    throw error;
  }
  executions.sort((a, b) => a.createdAt - b.createdAt);
  if (values.json) {
    for (const a of allocations) await writeLine(JSON.stringify({ kind: 'allocation', ...a }));
    for (const e of executions) await writeLine(JSON.stringify({ kind: 'execution', ...e }));
    return 0;
  }
  await table(
    ['ALLOCATION', 'ENVIRONMENT', 'GEN', 'STATE', 'PROVIDER', 'USES'],
    allocations.map((a) => [a.allocationId, a.environmentId, String(a.generation), a.state, `${a.provider}/${a.ownership}`, String(a.uses.length)]),
  );
  await writeLine('');
  const now = Date.now();
  await table(
    ['EXECUTION', 'STATUS', 'ENVIRONMENT', 'AGE', 'COMMAND'],
    executions.map((e) => [e.id, e.status, e.environment, age(now - e.createdAt), e.command.join(' ').slice(0, 60)]),
  );
  return 0;
}

/** Rows under a header, each column as wide as its widest cell. */
export async function table(header: string[], rows: string[][]): Promise<void> {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  for (const row of [header, ...rows]) await writeLine(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s}s` : s < 3600 ? `${Math.floor(s / 60)}m${s % 60}s` : `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
}
