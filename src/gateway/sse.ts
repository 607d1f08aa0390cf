/**
 * Server-sent events: the wire format (`id:`, `event:`, `data:` lines, blank line; `:` comments as heartbeats) and a
 * writer over a hijacked fastify reply that respects socket backpressure and ends when the client goes away.
 */
import type { FastifyReply } from 'fastify';
import type { OpenStreams } from './open-streams.ts';

export interface SseEvent {
  id?: string;
  event?: string;
  /** May span lines: each becomes its own `data:` line. */
  data: string;
}

/** Field values cannot hold line breaks; ids and types are ours, so this only guards against surprises. */
const oneLine = (value: string): string => value.replace(/[\r\n]+/g, ' ');

export function formatSseEvent(event: SseEvent): string {
  let text = '';
  if (event.id !== undefined) text += `id: ${oneLine(event.id)}\n`;
  if (event.event !== undefined) text += `event: ${oneLine(event.event)}\n`;
  for (const line of event.data.split(/\r\n|\r|\n/)) text += `data: ${line}\n`;
  return `${text}\n`;
}

export const formatSseComment = (text: string): string => `: ${oneLine(text)}\n\n`;

export class SseWriter {
  private readonly abort = new AbortController();
  private readonly unregister: () => void;
  private readonly heartbeat: NodeJS.Timeout;

  /** Hijacks the reply and sends the event-stream headers. */
  constructor(
    private readonly reply: FastifyReply,
    heartbeatMs: number,
    streams: OpenStreams,
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
    }, heartbeatMs);
    this.heartbeat.unref();
    this.unregister = streams.add(() => this.end());
  }

  /** Aborted when the client disconnects or the gateway closes. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get closed(): boolean {
    return this.abort.signal.aborted || this.reply.raw.writableEnded;
  }

  /** Writes one event; resolves once the socket accepts more (or the client is gone). */
  async send(event: SseEvent): Promise<void> {
    if (this.closed) return;
    if (this.reply.raw.write(formatSseEvent(event))) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        this.reply.raw.off('drain', done);
        this.signal.removeEventListener('abort', done);
        resolve();
      };
      this.reply.raw.once('drain', done);
      this.signal.addEventListener('abort', done, { once: true });
    });
  }

  end(): void {
    clearInterval(this.heartbeat);
    this.unregister();
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
    this.abort.abort();
  }
}
