/**
 * `berth events` and `berth replay` answered by a server: the audit feed of the token's scope (read up to the newest
 * event, or with --follow live over SSE, resumable with --after POSITION), and one stream replayed with the state
 * before and after each event. Lines are the same as the in-process commands print.
 */
import { BerthError } from '../../schemas/errors.ts';
import type { Berth } from '../client/berth-client.ts';
import type { RecordedEvent } from '../store/event-store.ts';
import { withServer, type ServerTarget, type TargetFlags } from './remote.ts';
import { replayHeader, replayHuman, replayJson } from './replay-lines.ts';
import { replayStream } from './replay-target.ts';
import { writeLine } from './stdout-lines.ts';

/** The flags of `berth events` this reads (structurally, so the command's module is not imported back). */
type EventsFlags = TargetFlags & { after?: string; follow?: boolean; prefix?: string[] };

export function eventsOverHttp(values: EventsFlags, server: ServerTarget, print: (e: RecordedEvent) => Promise<void>): Promise<number> {
  return withServer(
    values,
    async (berth) => {
      const after = values.after === undefined ? undefined : BigInt(values.after);
      const feed = values.follow ? berth.events.follow(after) : berth.events.read(after);
      const stop = () => feed.close();
      process.once('SIGINT', stop).once('SIGTERM', stop);
      try {
        for await (const event of feed) {
          if (values.prefix?.length && !values.prefix.some((p) => event.stream.startsWith(p))) continue;
          await print(event as RecordedEvent);
        }
      } finally {
        process.off('SIGINT', stop).off('SIGTERM', stop);
        feed.close();
      }
      return 0;
    },
    server,
  );
}

export function replayOverHttp(
  values: { url?: string; token?: string; at?: string; json?: boolean; operation?: string },
  server: ServerTarget,
  positionals: string[],
  usage: string,
): Promise<number> {
  return withServer(
    values,
    async (berth) => {
      // The client does not know its token's scope: the server finds the execution by its operationId.
      const stream = await replayStream(positionals, values.operation, (op) => executionOfOperation(berth, op), usage);
      const steps = await berth.streams.replay(stream, values.at === undefined ? undefined : Number(values.at));
      if (!values.json) await writeLine(replayHeader(stream, steps.length));
      for (const step of steps) {
        const line = { ...step, event: { ...step.event, revision: BigInt(step.event.revision), position: BigInt(step.event.position) } as RecordedEvent };
        await writeLine(values.json ? replayJson(line) : replayHuman(line));
      }
      return 0;
    },
    server,
  );
}

async function executionOfOperation(berth: Berth, operationId: string): Promise<string> {
  const [record] = await berth.executions.list({ operationId });
  if (!record) throw new BerthError('not_found', `No execution has the operationId ${operationId}.`, { operationId });
  return record.id;
}
