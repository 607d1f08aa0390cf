/**
 * `berth runtime [ls] | retire ID`: the runtimes sharing the server's event store, and the retirement of one (the
 * server answering adopts its unfinished actors and reconciles them: issue #17). Both need the admin token.
 */
import { parseCommandArgs, UsageError } from './command-args.ts';
import { remoteOptions, withServer } from './remote.ts';
import { writeLine } from './stdout-lines.ts';
import { table } from './text-table.ts';
import { runtimeUsage } from './usage.ts';

export async function runtimeCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, { ...remoteOptions, json: { type: 'boolean' } }, runtimeUsage);
  if (values.help) return void console.log(runtimeUsage), 0;
  const [verb = 'ls', id, extra] = positionals;
  if (extra !== undefined || !(verb === 'ls' ? id === undefined : verb === 'retire' && id !== undefined)) {
    throw new UsageError(verb === 'retire' ? 'retire takes one runtime id' : `unknown runtime command "${verb}"`, runtimeUsage);
  }
  if (verb === 'retire') {
    const report = await withServer(values, (berth) => berth.runtimes.retire(id!));
    if (values.json) await writeLine(JSON.stringify(report));
    else await writeLine(`retired ${report.runtimeId}: adopted ${report.adopted} unfinished actors, reconciled ${report.recovered}${report.failed ? `, ${report.failed} failed` : ''}`);
    return report.failed > 0 ? 1 : 0;
  }
  const runtimes = await withServer(values, (berth) => berth.runtimes.list());
  if (values.json) {
    for (const r of runtimes) await writeLine(JSON.stringify(r));
    return 0;
  }
  await table(
    ['RUNTIME', 'EPOCH', 'STATE', 'URL', 'HOST', 'PID', 'STARTED'],
    runtimes.map((r) => [
      r.self ? `${r.runtimeId} (this)` : r.runtimeId,
      String(r.epoch),
      r.state === 'retired' ? `retired by ${r.retiredBy}` : r.state,
      r.url ?? '-',
      r.hostname,
      String(r.pid),
      r.startedAt,
    ]),
  );
  return 0;
}
