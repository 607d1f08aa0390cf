/**
 * `berth check-history [--data-dir DIR | --store SPEC] [--json]`: replays every actor stream of the store through
 * today's machines and reports each event they would refuse or fold to another state than the one recorded (the
 * Temporal replay test). Exit 0 when the whole log folds the same, 1 with one line per event when it does not. It
 * only reads, so it may run beside a server on the same store.
 */
import { checkHistory } from '../actors/history-check.ts';
import { resolveSettings } from '../runtime/config.ts';
import { openConfiguredStore } from '../runtime/core/open-configured-store.ts';
import { actorTypes } from '../runtime/registry.ts';
import { parseCommandArgs, storeOptions } from './command-args.ts';
import { writeLine } from './stdout-lines.ts';
import { checkHistoryUsage } from './usage.ts';


export async function checkHistoryCommand(argv: string[]): Promise<number> {
  const { values } = parseCommandArgs(argv, { ...storeOptions, json: { type: 'boolean' } }, checkHistoryUsage);
  if (values.help) return void console.log(checkHistoryUsage), 0;
  const store = await openConfiguredStore(resolveSettings({ dataDir: values['data-dir'], store: values.store }), { mustExist: true });
  try {
    const report = await checkHistory(store, actorTypes);
    for (const p of report.problems) {
      await writeLine(values.json ? JSON.stringify(p) : `${p.stream}@${p.revision} ${p.type}: ${p.problem}: ${p.message}`);
    }
    const summary = `${report.events} events of ${report.streams} actor streams: ${report.problems.length === 0 ? 'all fold as recorded' : `${report.problems.length} would not`}`;
    if (values.json) process.stderr.write(`${summary}\n`);
    else await writeLine(summary);
    return report.problems.length === 0 ? 0 : 1;
  } finally {
    await store.close();
  }
}
