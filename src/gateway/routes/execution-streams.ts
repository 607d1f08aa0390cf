/**
 * Following an execution: `GET /v1/executions/{id}/events` (SSE) and `GET /v1/executions/{id}/stream` (WebSocket),
 * both in the DESIGN §8 formats. SSE output ids are `<stream>:<cursor after the event's bytes>`, so Last-Event-ID
 * resumes exactly that stream; follow one stream per connection (`?stream=`) for browsers' automatic resume, or
 * pass the other streams' cursors as query parameters.
 */
import { z } from 'zod';
import {
  executionEventsQuery,
  executionStreamQuery,
  idParams,
  outputEventIdSchema,
  wsClientControlSchema,
  wsServerTextSchema,
} from '../../../schemas/api.ts';
import { BerthError } from '../../../schemas/errors.ts';
import { outputStreams } from '../../../schemas/output.ts';
import { outputSseEvent } from '../../../schemas/sse-frames.ts';
import { toBerthError } from '../errors.ts';
import { serveExecutionStream } from '../execution-stream.ts';
import { followExecution } from '../output-follower.ts';
import { parseOrReject } from '../../../schemas/parse-input.ts';
import { defineRoute, resourcePlugin } from '../route.ts';
import { openSse } from '../sse.ts';
import { stringifyWire } from '../wire-json.ts';
import { acceptUpgrade, isUpgradeRequest } from '../ws-upgrade.ts';

/**
 * Output bytes per SSE event: its text (base64, in JSON, in the event) stays a small string that V8 collects young; a
 * 256 KiB event would make ~1 MiB of large old-generation strings, kept until a full collection.
 */
const SSE_EVENT_BYTES = 48 * 1024;

export const executionStreamsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/executions/{id}/events',
      summary: 'Output and status as server-sent events, resumable with Last-Event-ID',
      description:
        'Each output event: `id: <stream>:<cursor after its bytes>`, `event: output`, ' +
        '`data: {"stream","cursor" (of its first byte),"data" (base64)}`. `event: status` (no id) on each status ' +
        'change; the terminal one comes last, after all output, and ends the response.',
      params: idParams,
      query: executionEventsQuery,
      queryToken: true,
      headers: { 'Last-Event-ID': { description: 'Resume after `<stream>:<cursor>`', schema: z.string() } },
      responses: { 200: { description: 'An event stream', schema: z.string(), contentType: 'text/event-stream' } },
    },
    async ({ deps, caller, params, query, request, reply }) => {
      const cursors = { stdout: query.stdout ?? 0, stderr: query.stderr ?? 0, pty: query.pty ?? 0 };
      const lastEventId = request.headers['last-event-id'];
      if (lastEventId !== undefined) {
        const last = parseOrReject(outputEventIdSchema, lastEventId, 'header');
        cursors[last.stream] = last.cursor;
      }
      await deps.api.getExecution(caller, params.id); // not_found as a plain error, before the stream opens
      deps.slots.hold(request, reply.raw);
      const sse = openSse(deps, reply, request.log);
      try {
        const follow = followExecution(deps.api, caller, params.id, {
          streams: query.stream ? [query.stream] : outputStreams,
          cursors,
          chunkBytes: Math.min(deps.limits.chunkBytes, SSE_EVENT_BYTES),
          readBytes: deps.limits.followReadBytes,
          room: () => sse.room(),
          pollMs: deps.limits.pollMs,
          signal: sse.signal,
        });
        for await (const item of follow) {
          if (item.kind === 'output') {
            await sse.send(outputSseEvent(item.stream, item.cursor, item.data, item.next));
          } else {
            await sse.send({ event: 'status', data: stringifyWire(item.record) });
          }
          if (sse.closed) break;
        }
      } catch (error) {
        const mapped = toBerthError(error);
        if (mapped.status >= 500) request.log.error({ err: error }, 'execution event stream failed');
        await sse.send({ event: 'error', data: stringifyWire(mapped.toBody()) });
      } finally {
        sse.end();
      }
      return reply;
    },
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/executions/{id}/stream',
      summary: 'Output and status over a WebSocket; stdin, resize and end from the client',
      description:
        'Server -> client binary: byte 0 stream (1 stdout, 2 stderr, 3 pty), bytes 1-8 u64 BE cursor of the first ' +
        'data byte, then data. Text: {"type":"status", ...record} on every status change; the terminal one comes ' +
        'last, after all output, followed by close 1000. Client -> server binary: stdin bytes; text ' +
        '{"type":"resize","cols","rows"} or {"type":"end"}. A client that stops reading is closed with 1013: ' +
        'reconnect with ?stdout=&stderr=&pty= cursors. Disconnecting never cancels the execution.',
      params: idParams,
      query: executionStreamQuery,
      queryToken: true,
      websocket: true,
      messages: { server: wsServerTextSchema, client: wsClientControlSchema },
      responses: { 101: { description: 'Switching to the WebSocket protocol' } },
    },
    async ({ deps, caller, params, query, request, reply }) => {
      if (!isUpgradeRequest(request)) {
        throw new BerthError('invalid_request', 'This path speaks WebSocket: send an upgrade request.', {
          reason: 'upgrade_required',
        });
      }
      await deps.api.getExecution(caller, params.id); // not_found as HTTP, before the handshake
      deps.slots.hold(request, request.raw.socket);
      const ws = await acceptUpgrade(deps.wss, request, reply);
      const cursors = { stdout: query.stdout ?? 0, stderr: query.stderr ?? 0, pty: query.pty ?? 0 };
      request.log.info({ execution: params.id, cursors }, 'execution websocket opened');
      void serveExecutionStream(ws, { deps, caller, id: params.id, cursors, log: request.log });
      return reply;
    },
  ),
]);
