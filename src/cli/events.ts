/**
 * `berth events [--follow] [--after POSITION] [--prefix P] [--json]`: prints the global log in order, then with
 * --follow keeps printing new events live until interrupted. The server found by remote.ts answers (the audit feed
 * of the token's scope, events-remote.ts); with none, the data directory's store is read in this process.
 */
import type { RecordedEvent } from '../store/event-store.ts';
import { matchesFilter } from '../store/event-store.ts';
import { resolveSettings } from '../runtime/config.ts';
import { openConfiguredStore } from '../runtime/core/open-configured-store.ts';
import { parseCommandArgs, storeOptions, UsageError } from './command-args.ts';
import { eventHuman, eventJson } from './event-lines.ts';
import { eventsOverHttp } from './events-remote.ts';
import { findServer, remoteOptions } from './remote.ts';
import { writeLine } from './stdout-lines.ts';
import { eventsUsage } from './usage.ts';


const pageSize = 1000;

const options = {
  ...storeOptions,
  ...remoteOptions,
  follow: { type: 'boolean', short: 'f' },
  after: { type: 'string' },
  prefix: { type: 'string', multiple: true },
  json: { type: 'boolean' },
} as const;

export async function eventsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, options, eventsUsage);
  if (values.help) return void console.log(eventsUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, eventsUsage);
  if (values.after !== undefined && !/^\d{1,20}$/.test(values.after)) throw new UsageError(`--after takes a global position, not "${values.after}"`, eventsUsage);
  const print = (e: RecordedEvent) => writeLine(values.json ? eventJson(e) : eventHuman(e));
  const server = await findServer(values);
  if (server) {
    if (values.store !== undefined) throw new UsageError(`--store is for reading in this process, but a server answers at ${server.url}`, eventsUsage);
    return eventsOverHttp(values, server, print);
  }
  if (values.token !== undefined) throw new UsageError('--token is for a server, and none holds the data directory: name it with --url (or BERTH_URL)', eventsUsage);

  const settings = resolveSettings({ dataDir: values['data-dir'], store: values.store });
  const store = await openConfiguredStore(settings, { mustExist: true });
  const filter = values.prefix?.length ? { streamPrefixes: values.prefix } : undefined;
  try {
    let position: bigint | 'start' = values.after === undefined ? 'start' : BigInt(values.after);
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
