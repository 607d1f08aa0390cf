/**
 * `berth replay <stream|id> [--at N] [--json]` (or `--operation OPID`): prints each event of a stream with the
 * machine state before and after it. The server found by remote.ts answers (events-remote.ts); with none, the data
 * directory's store is read in this process, folding through the actor type the stream's category names (and
 * showing the context keys each event changed).
 */
import { resolveSettings } from '../runtime/config.ts';
import { openConfiguredStore } from '../runtime/core/open-configured-store.ts';
import { replayStoredStream } from '../runtime/core/stream-replay.ts';
import { executionIdOf } from '../runtime/executions/execution-service.ts';
import { parseCommandArgs, storeOptions, UsageError } from './command-args.ts';
import { replayOverHttp } from './events-remote.ts';
import { findServer, remoteOptions } from './remote.ts';
import { replayHeader, replayHuman, replayJson } from './replay-lines.ts';
import { replayStream } from './replay-target.ts';
import { writeLine } from './stdout-lines.ts';
import { replayUsage } from './usage.ts';


export async function replayCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    { ...storeOptions, ...remoteOptions, at: { type: 'string' }, json: { type: 'boolean' }, operation: { type: 'string' }, scope: { type: 'string' } },
    replayUsage,
  );
  if (values.help) return void console.log(replayUsage), 0;
  if (values.at !== undefined && !/^\d+$/.test(values.at)) {
    throw new UsageError(`--at takes a revision (0, 1, …), not "${values.at}"`, replayUsage);
  }
  const server = await findServer(values);
  if (server) {
    const local = (['store', 'scope'] as const).find((f) => values[f] !== undefined);
    if (local) throw new UsageError(`--${local} is for reading in this process, but a server answers at ${server.url}`, replayUsage);
    return replayOverHttp(values, server, positionals, replayUsage);
  }
  if (values.token !== undefined) throw new UsageError('--token is for a server, and none holds the data directory: name it with --url (or BERTH_URL)', replayUsage);
  // Locally the execution's id is derived from the scope and operationId, as the runtime derived it.
  const stream = await replayStream(positionals, values.operation, async (op) => executionIdOf(values.scope ?? 'default', op), replayUsage);
  const settings = resolveSettings({ dataDir: values['data-dir'], store: values.store });
  const store = await openConfiguredStore(settings, { mustExist: true });
  try {
    const replay = await replayStoredStream(store, stream, { at: values.at === undefined ? undefined : BigInt(values.at) });
    if (!replay.actorType) {
      const category = stream.includes('-') ? stream.slice(0, stream.indexOf('-')) : stream;
      process.stderr.write(`berth: no actor type is registered for category "${category}": showing events without states\n`);
    }
    if (!values.json) await writeLine(replayHeader(stream, replay.steps.length));
    for (const step of replay.steps) await writeLine(values.json ? replayJson(step) : replayHuman(step));
  } finally {
    await store.close();
  }
  return 0;
}
