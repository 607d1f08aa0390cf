/**
 * `berth projections [ls] | rebuild NAME`: the server's read models (position, lag, failure) and the rebuild of one
 * that failed on an event, once the event or Berth is fixed. Both need the admin token.
 */
import { parseCommandArgs, UsageError } from './command-args.ts';
import { remoteOptions, withServer } from './remote.ts';
import { writeLine } from './stdout-lines.ts';
import { table } from './text-table.ts';
import { projectionsUsage } from './usage.ts';


export async function projectionsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, { ...remoteOptions, json: { type: 'boolean' } }, projectionsUsage);
  if (values.help) return void console.log(projectionsUsage), 0;
  const [verb = 'ls', name, extra] = positionals;
  if (extra !== undefined || !(verb === 'ls' ? name === undefined : verb === 'rebuild' && name !== undefined)) {
    throw new UsageError(verb === 'rebuild' ? 'rebuild takes one read model name' : `unknown projections command "${verb}"`, projectionsUsage);
  }
  const states = await withServer(values, (berth) => (verb === 'ls' ? berth.projections.list() : berth.projections.rebuild(name!).then((s) => [s])));
  if (values.json) {
    for (const s of states) await writeLine(JSON.stringify(s));
    return 0;
  }
  await table(
    ['NAME', 'POSITION', 'LAG', 'STATE'],
    states.map((s) => [s.name, s.position, s.lag, s.failed ? `failed at ${s.failed.position}: ${s.failed.message}` : 'serving']),
  );
  return states.some((s) => s.failed) ? 1 : 0;
}
