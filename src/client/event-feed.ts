/**
 * Server-sent event feeds resumed by global position: `events.follow` (the audit feed, `GET /v1/events`) and
 * `leases.events` (a lease's pauses). Whenever the connection drops the feed reconnects with Last-Event-ID from the
 * last position seen, so no event is skipped or repeated.
 */
import type { z } from 'zod';
import { errorBodySchema, leasePauseFrameSchema, recordedEventJsonSchema, type RecordedEventJson } from '../../schemas/api.ts';
import { BerthApiError } from './berth-api-error.ts';
import type { HttpTransport } from './http-transport.ts';
import { Backoff, type BackoffOptions } from './reconnect-backoff.ts';
import { readSse } from './sse-parser.ts';

/** A recorded event with its revision and global position as bigints again. */
export type FeedEvent = Omit<RecordedEventJson, 'revision' | 'position'> & { revision: bigint; position: bigint };

/** A change of a lease's state, with the global position of the event that made it. */
export type LeasePauseFrame = z.output<typeof leasePauseFrameSchema> & { position: bigint };

export interface Feed<T> extends AsyncIterable<T> {
  close(): void;
}
export type EventFeed = Feed<FeedEvent>;

interface FeedSpec<T> {
  path: string;
  /** The item of one SSE event (its `id:` is the global position). */
  parse(data: string, id: bigint): T;
  /** The last item: the server ends the stream after it, and the feed ends too. */
  last?(item: T): boolean;
  /** The server ending the stream ends the feed (rather than a drop to resume from). */
  endsWithStream?: boolean;
}

/**
 * `fromPosition` 'now' starts at the log's head when the feed connects; once an event has come, a reconnection
 * resumes after it like any other (a drop before the first event starts at the head again).
 */
function followSse<T extends { position: bigint }>(http: HttpTransport, spec: FeedSpec<T>, fromPosition?: bigint | 'now', backoffOptions?: BackoffOptions): Feed<T> {
  const abort = new AbortController();
  let last = fromPosition === 'now' ? undefined : fromPosition;
  const backoff = new Backoff(backoffOptions);

  async function* items(): AsyncGenerator<T> {
    while (!abort.signal.aborted) {
      try {
        const headers: Record<string, string> = { accept: 'text/event-stream' };
        if (last !== undefined) headers['last-event-id'] = last.toString();
        const path = last === undefined && fromPosition === 'now' ? `${spec.path}${spec.path.includes('?') ? '&' : '?'}after=now` : spec.path;
        const response = await http.send('GET', path, { headers, signal: abort.signal });
        backoff.reset();
        for await (const sse of readSse(response.body!)) {
          if (sse.event === 'error') {
            const { code, message, detail } = errorBodySchema.parse(JSON.parse(sse.data)).error;
            throw BerthApiError.fromCode(code, message, detail);
          }
          const item = spec.parse(sse.data, BigInt(sse.id ?? '-1'));
          last = item.position;
          yield item;
          if (spec.last?.(item)) return;
        }
        if (spec.endsWithStream) return;
      } catch (error) {
        if (abort.signal.aborted) return;
        if (error instanceof BerthApiError && error.status < 500) throw error;
        await backoff.wait(error, abort.signal);
      }
    }
  }

  return { close: () => abort.abort(), [Symbol.asyncIterator]: items };
}

/** The audit feed after `fromPosition` ('now': from the head); with `untilHead`, ending after the newest event when the server answers. */
export const followEvents = (http: HttpTransport, fromPosition?: bigint | 'now', backoffOptions?: BackoffOptions, untilHead = false): EventFeed =>
  followSse(
    http,
    {
      path: untilHead ? '/v1/events?until=head' : '/v1/events',
      endsWithStream: untilHead,
      parse: (data) => {
        const wire = recordedEventJsonSchema.parse(JSON.parse(data));
        return { ...wire, revision: BigInt(wire.revision), position: BigInt(wire.position) };
      },
    },
    fromPosition,
    backoffOptions,
  );

export const followLeasePauses = (http: HttpTransport, key: string, fromPosition?: bigint, backoffOptions?: BackoffOptions): Feed<LeasePauseFrame> =>
  followSse(
    http,
    {
      path: `/v1/leases/${encodeURIComponent(key)}/events`,
      parse: (data, position) => ({ ...leasePauseFrameSchema.parse(JSON.parse(data)), position }),
      last: (frame) => frame.state === 'released',
    },
    fromPosition,
    backoffOptions,
  );
