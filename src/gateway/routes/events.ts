/**
 * `GET /v1/events`: the audit feed of the caller's scope as server-sent events. `id:` is the event's global position
 * (resume with Last-Event-ID or `?after=`, both exclusive; `?after=now` starts at the head; `?until=head` ends the stream
 * after the newest event at the request), `event:` its type,
 * `data:` the recorded event as JSON with revision and position as decimal strings.
 */
import { z } from 'zod';
import { eventsFeedQuery, positionEventIdSchema } from '../../../schemas/api.ts';
import { parseOrReject } from '../../../schemas/parse-input.ts';
import { defineRoute, resourcePlugin } from '../route.ts';
import { serveSseFeed } from '../sse.ts';
import { recordedEventToWire, stringifyWire } from '../wire-json.ts';

export const eventsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/events',
      summary: "The scope's audit feed (catch-up, then live), resumable by global position",
      query: eventsFeedQuery,
      queryToken: true,
      headers: { 'Last-Event-ID': { description: 'Resume after this global position', schema: z.string() } },
      responses: { 200: { description: 'An event stream', schema: z.string(), contentType: 'text/event-stream' } },
    },
    async ({ deps, caller, query, request, reply }) => {
      const lastEventId = request.headers['last-event-id'];
      const after = lastEventId !== undefined ? parseOrReject(positionEventIdSchema, lastEventId, 'header') : query.after;
      const from = after === undefined ? 'start' : after === 'now' ? 'now' : BigInt(after);
      const feed = deps.api.events(caller, from, { untilHead: query.until === 'head' });
      return serveSseFeed(deps, request, reply, feed, (event) => {
        const wire = recordedEventToWire(event);
        return { id: wire.position, event: event.type, data: stringifyWire(wire) };
      });
    },
  ),
]);
