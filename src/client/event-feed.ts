/**
 * `events.follow`: the audit feed (`GET /v1/events`) as an async iterator, resumed with Last-Event-ID from the last
 * position seen whenever the connection drops, so no event is skipped or repeated.
 */
import { errorBodySchema, recordedEventJsonSchema, type RecordedEventJson } from '../../schemas/api.ts';
import { BerthApiError } from './berth-api-error.ts';
import type { HttpTransport } from './http-transport.ts';
import { Backoff, type BackoffOptions } from './reconnect-backoff.ts';
import { readSse } from './sse-parser.ts';

/** A recorded event with its revision and global position as bigints again. */
export type FeedEvent = Omit<RecordedEventJson, 'revision' | 'position'> & { revision: bigint; position: bigint };

export interface EventFeed extends AsyncIterable<FeedEvent> {
  close(): void;
}

export function followEvents(http: HttpTransport, fromPosition?: bigint, backoffOptions?: BackoffOptions): EventFeed {
  const abort = new AbortController();
  let last = fromPosition;
  const backoff = new Backoff(backoffOptions);

  async function* events(): AsyncGenerator<FeedEvent> {
    while (!abort.signal.aborted) {
      try {
        const headers: Record<string, string> = { accept: 'text/event-stream' };
        if (last !== undefined) headers['last-event-id'] = last.toString();
        const response = await http.send('GET', '/v1/events', { headers, signal: abort.signal });
        backoff.reset();
        for await (const sse of readSse(response.body!)) {
          if (sse.event === 'error') {
            const { code, message, detail } = errorBodySchema.parse(JSON.parse(sse.data)).error;
            throw BerthApiError.fromCode(code, message, detail);
          }
          const wire = recordedEventJsonSchema.parse(JSON.parse(sse.data));
          const event: FeedEvent = { ...wire, revision: BigInt(wire.revision), position: BigInt(wire.position) };
          last = event.position;
          yield event;
        }
      } catch (error) {
        if (abort.signal.aborted) return;
        if (error instanceof BerthApiError && error.status < 500) throw error;
        await backoff.wait(error, abort.signal);
      }
    }
  }

  return { close: () => abort.abort(), [Symbol.asyncIterator]: events };
}
