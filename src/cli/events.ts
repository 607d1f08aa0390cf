/**
 * `berth events [--follow] [--prefix P] [--json]`: prints the global log in order (read in pages), then with
 * --follow keeps printing new events live until interrupted.
 */
import type { RecordedEvent } from '../store/event-store.ts';
import { matchesFilter } from '../store/event-store.ts';
import { resolveSettings } from '../runtime/config.ts';
import { openConfiguredStore } from '../runtime/core/open-configured-store.ts';
import { parseCommandArgs, storeOptions, UsageError } from './command-args.ts';
import { eventHuman, eventJson } from './event-lines.ts';
import { writeLine } from './stdout-lines.ts';

export const eventsUsage = `usage: berth events [--follow] [--prefix STREAM_PREFIX]... [--json] [--data-dir DIR] [--store SPEC]
  Prints every event of the log in global order; --follow keeps printing new ones until Ctrl-C.`;

const pageSize = 1000;

export async function eventsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    { ...storeOptions, follow: { type: 'boolean', short: 'f' }, prefix: { type: 'string', multiple: true }, json: { type: 'boolean' } },
    eventsUsage,
  );
  if (values.help) return void console.log(eventsUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, eventsUsage);
  const settings = resolveSettings({ dataDir: values['data-dir'], store: values.store });
  const store = await openConfiguredStore(settings, { mustExist: true });
  const filter = values.prefix?.length ? { streamPrefixes: values.prefix } : undefined;
  const print = (e: RecordedEvent) => writeLine(values.json ? eventJson(e) : eventHuman(e));
  try {
    let position: bigint | 'start' = 'start';
    for (;;) {
      const page = await store.readAll({ fromPosition: position, maxCount: pageSize });
      for (const e of page) if (matchesFilter(e, filter)) await print(e);
      if (page.length > 0) position = page[page.length - 1].position;
      if (page.length < pageSize) break;
    }
    if (values.follow) {
      const live = store.subscribeToAll({ fromPosition: position, filter });
      const stop = () => void live.close();
      process.once('SIGINT', stop).once('SIGTERM', stop);
      try {
        for await (const e of live) await print(e);
      } finally {
        process.off('SIGINT', stop).off('SIGTERM', stop);
        await live.close();
      }
    }
  } finally {
    await store.close();
  }
  return 0;
}
