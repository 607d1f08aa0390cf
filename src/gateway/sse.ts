/**
 * Server-sent events: a writer over a hijacked fastify reply that respects socket backpressure, ends when the client
 * goes away, and drops a client that takes nothing for the stall window (as the WebSocket's 1013), so a reader that
 * stopped holds no more than its socket's buffer. The wire format is schemas/sse-frames.ts (the host's too).
 */
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { toBerthError } from './errors.ts';
import type { OpenStreams } from './open-streams.ts';
import type { GatewayDeps } from './route.ts';
import { stringifyWire } from './wire-json.ts';
import { formatSseComment, formatSseEvent, type SseEvent } from '../../schemas/sse-frames.ts';

export interface SseWriterOptions {
  heartbeatMs: number;
  /** How long a write may wait for the client to take what is buffered before the connection is dropped. */
  stallMs: number;
  /** Output bytes (before base64) the writer lets be buffered for the client: the bound of `room()`. */
  bufferBytes: number;
  streams: OpenStreams;
  log: FastifyBaseLogger;
}

export class SseWriter {
  private readonly abort = new AbortController();
  private readonly unregister: () => void;
  private readonly heartbeat: NodeJS.Timeout;

  /** Hijacks the reply and sends the event-stream headers. */
  constructor(
    private readonly reply: FastifyReply,
    private readonly options: SseWriterOptions,
  ) {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache, no-transform',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    res.flushHeaders();
    res.on('close', () => this.abort.abort());
    this.heartbeat = setInterval(() => {
      if (!this.closed) res.write(formatSseComment('heartbeat'));
    }, options.heartbeatMs);
    this.heartbeat.unref();
    this.unregister = options.streams.add(() => this.end());
  }

  /** Aborted when the client disconnects, stalls, or the gateway closes. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get closed(): boolean {
    return this.abort.signal.aborted || this.reply.raw.writableEnded;
  }

  /** Output bytes that may be read for this client now (base64 makes 4 bytes on the wire of every 3). */
  room(): number {
    return Math.max(0, Math.floor(((this.options.bufferBytes - this.reply.raw.writableLength) * 3) / 4));
  }

  /**
   * Writes one event; resolves once the socket accepts more, or the client is gone, or it took nothing for the stall
   * window (then the connection is dropped with what it buffered).
   */
  async send(event: SseEvent): Promise<void> {
    if (this.closed) return;
    const res = this.reply.raw;
    if (res.write(formatSseEvent(event))) return;
    await new Promise<void>((resolve) => {
      const stalled = setTimeout(() => {
        this.options.log.info({ buffered: res.writableLength }, 'closing an SSE client that stopped reading');
        this.drop();
      }, this.options.stallMs);
      const done = () => {
        clearTimeout(stalled);
        res.off('drain', done);
        this.signal.removeEventListener('abort', done);
        resolve();
      };
      res.once('drain', done);
      this.signal.addEventListener('abort', done, { once: true });
    });
  }

  end(): void {
    clearInterval(this.heartbeat);
    this.unregister();
    if (!this.reply.raw.writableEnded && !this.reply.raw.destroyed) this.reply.raw.end();
    this.abort.abort();
  }

  /** Drops the connection without flushing: a client that does not read would keep the buffer forever. */
  private drop(): void {
    clearInterval(this.heartbeat);
    this.unregister();
    this.reply.raw.destroy();
    this.abort.abort();
  }
}

/** An event stream on `reply` with the gateway's bounds (heartbeat, stall window, buffer). */
export const openSse = (deps: GatewayDeps, reply: FastifyReply, log: FastifyBaseLogger): SseWriter =>
  new SseWriter(reply, {
    heartbeatMs: deps.limits.heartbeatMs,
    stallMs: deps.limits.streamStallMs,
    bufferBytes: deps.limits.streamBufferBytes,
    streams: deps.streams,
    log,
  });

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
