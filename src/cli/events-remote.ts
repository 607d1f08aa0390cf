/**
 * The remote paths of `berth events` and `berth replay` (taken when --url or BERTH_URL names a server): the audit
 * feed of the token's scope followed live over SSE (resumable with --after POSITION), and one stream replayed with the
 * state before and after each event. Lines are the same as the in-process commands print.
 */
import { BerthError } from '../../schemas/errors.ts';
import type { RecordedEvent } from '../store/event-store.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { eventHuman, eventJson } from './event-lines.ts';
import { replayStream } from './replay-target.ts';
import { connectRemote, isUnreachable, remoteOptions, remoteUsage, serverUrl, unreachable } from './remote.ts';
import { writeLine } from './stdout-lines.ts';

export const eventsRemoteUsage = `usage: berth events --follow [--after POSITION] [--prefix STREAM_PREFIX]... [--json] --url URL [--token TOKEN]
  Over HTTP: follows the audit feed of the token's scope live from the start (or after POSITION) until Ctrl-C.
${remoteUsage}`;

export const replayRemoteUsage = `usage: berth replay STREAM|ID|--operation OPID [--at REVISION] [--json] --url URL [--token TOKEN]
  Over HTTP: prints every event of STREAM (of the token's scope) with the state before -> after; a bare id names
  its resource's stream, --operation the execution submitted with that operationId.
${remoteUsage}`;

export async function eventsRemoteCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    {
      ...remoteOptions,
      follow: { type: 'boolean', short: 'f' },
      after: { type: 'string' },
      prefix: { type: 'string', multiple: true },
      json: { type: 'boolean' },
    },
    eventsRemoteUsage,
  );
  if (values.help) return void console.log(eventsRemoteUsage), 0;
  if (positionals.length > 0) throw new UsageError(`unexpected argument ${positionals[0]}`, eventsRemoteUsage);
  // The feed is catch-up-then-live with no end marker: over HTTP, following is the only mode.
  if (!values.follow) throw new UsageError('over HTTP the audit feed is live: add --follow (-f)', eventsRemoteUsage);
  if (values.after !== undefined && !/^\d{1,20}$/.test(values.after)) throw new UsageError(`--after takes a global position, not "${values.after}"`, eventsRemoteUsage);

  const berth = await connectRemote(values);
  const feed = berth.events.follow(values.after === undefined ? undefined : BigInt(values.after));
  const stop = () => feed.close();
  process.once('SIGINT', stop).once('SIGTERM', stop);
  try {
    for await (const event of feed) {
      if (values.prefix?.length && !values.prefix.some((p) => event.stream.startsWith(p))) continue;
      const recorded = event as RecordedEvent;
      await writeLine(values.json ? eventJson(recorded) : eventHuman(recorded));
    }
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(serverUrl(values.url), error);
    throw error;
  } finally {
    process.off('SIGINT', stop).off('SIGTERM', stop);
    feed.close();
  }
  return 0;
}

export async function replayRemoteCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    { ...remoteOptions, at: { type: 'string' }, json: { type: 'boolean' }, operation: { type: 'string' } },
    replayRemoteUsage,
  );
  if (values.help) return void console.log(replayRemoteUsage), 0;
  if (values.at !== undefined && !/^\d+$/.test(values.at)) throw new UsageError(`--at takes a revision (0, 1, …), not "${values.at}"`, replayRemoteUsage);
  const berth = await connectRemote(values);
  try {
    // The client does not know its token's scope: the server finds the execution by its operationId.
    const stream = await replayStream(positionals, values.operation, (op) => executionOfOperation(berth, op), replayRemoteUsage);
    const steps = await berth.streams.replay(stream, values.at === undefined ? undefined : Number(values.at));
    if (!values.json) await writeLine(`${stream}: ${steps.length} events`);
    for (const step of steps) {
      const event: RecordedEvent = { ...step.event, revision: BigInt(step.event.revision), position: BigInt(step.event.position) };
      await writeLine(
        values.json
          ? eventJson(event, { stateBefore: step.stateBefore, stateAfter: step.stateAfter })
          : `${eventHuman(event)}\n    state: ${JSON.stringify(step.stateBefore)} -> ${JSON.stringify(step.stateAfter)}`,
      );
    }
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(serverUrl(values.url), error);
    throw error;
  }
  return 0;
}

async function executionOfOperation(berth: Awaited<ReturnType<typeof connectRemote>>, operationId: string): Promise<string> {
  const [record] = await berth.executions.list({ operationId });
  if (!record) throw new BerthError('not_found', `No execution has the operationId ${operationId}.`, { operationId });
  return record.id;
}
