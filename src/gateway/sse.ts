/**
 * Server-sent events of the gateway: the shared writer (src/streams/sse-writer.ts) over a hijacked fastify reply,
 * with the gateway's bounds, and feeds served through it.
 */
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { toBerthError } from './errors.ts';
import type { GatewayDeps } from './route.ts';
import { stringifyWire } from './wire-json.ts';
import type { SseEvent } from '../../schemas/sse-frames.ts';
import { SseWriter } from '../streams/sse-writer.ts';

/** An event stream on `reply` with the gateway's bounds (heartbeat, stall window, buffer). */
export function openSse(deps: GatewayDeps, reply: FastifyReply, log: FastifyBaseLogger): SseWriter {
  reply.hijack();
  return new SseWriter(reply.raw, {
    heartbeatMs: deps.limits.heartbeatMs,
    stallMs: deps.limits.streamStallMs,
    bufferBytes: deps.limits.streamBufferBytes,
    streams: deps.streams,
    log,
  });
}

/**
 * Serves `feed` as an event stream (the caller's stream slot held for it): each item as `toEvent` writes it, an
 * `error` event if the feed fails, and the feed closed when the client goes away.
 */
export async function serveSseFeed<T>(
  deps: GatewayDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  feed: AsyncIterable<T> & { close(): Promise<void> },
  toEvent: (item: T) => SseEvent,
): Promise<FastifyReply> {
  try {
    deps.slots.hold(request, reply.raw);
  } catch (e) {
    await feed.close(); // refused (too many open streams): the feed was never read
    throw e;
  }
  const sse = openSse(deps, reply, request.log);
  sse.signal.addEventListener('abort', () => void feed.close(), { once: true });
  try {
    for await (const item of feed) {
      if (sse.closed) break;
      await sse.send(toEvent(item));
    }
  } catch (error) {
    const mapped = toBerthError(error);
    if (mapped.status >= 500) request.log.error({ err: error, url: request.routeOptions.url }, 'event feed failed');
    await sse.send({ event: 'error', data: stringifyWire(mapped.toBody()) });
  } finally {
    sse.end();
    await feed.close();
  }
  return reply;
}
