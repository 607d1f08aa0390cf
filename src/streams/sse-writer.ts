/**
 * Server-sent events on a raw node response: the event-stream headers, a heartbeat, writes paced by the socket, the
 * end when the client goes away, and the drop of a client that takes nothing for the stall window (as the
 * WebSocket's 1013), so a reader that stopped holds no more than its socket's buffer. The gateway's event streams and
 * the Execution Host's output replay both write through it; the frames are schemas/sse-frames.ts.
 */
import type http from 'node:http';
import { formatSseComment, formatSseEvent, type SseEvent } from '../../schemas/sse-frames.ts';
import { writePaced } from './paced-write.ts';

export interface SseWriterOptions {
  heartbeatMs: number;
  /** How long a write may wait for the client to take what is buffered before the connection is dropped. */
  stallMs: number;
  /** Output bytes (before base64) the writer lets be buffered for the client: the bound of `room()`. */
  bufferBytes: number;
  /** Where a server that closes ends its open streams itself (servers do not wait for them). */
  streams?: { add(close: () => void): () => void };
  log: { info(detail: object, message: string): void };
}

export class SseWriter {
  private readonly abort = new AbortController();
  private readonly unregister: () => void;
  private readonly heartbeat: NodeJS.Timeout;

  /** Sends the event-stream headers. */
  constructor(
    private readonly res: http.ServerResponse,
    private readonly options: SseWriterOptions,
  ) {
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
    this.unregister = options.streams?.add(() => this.end()) ?? (() => undefined);
  }

  /** Aborted when the client disconnects, stalls, or the server closes. */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  get closed(): boolean {
    return this.abort.signal.aborted || this.res.writableEnded;
  }

  /** Output bytes that may be read for this client now (base64 makes 4 bytes on the wire of every 3). */
  room(): number {
    return Math.max(0, Math.floor(((this.options.bufferBytes - this.res.writableLength) * 3) / 4));
  }

  /**
   * Writes one event; resolves once the socket accepts more, or the client is gone, or it took nothing for the stall
   * window (then the connection is dropped with what it buffered).
   */
  async send(event: SseEvent): Promise<void> {
    if (this.closed) return;
    await writePaced(this.res, formatSseEvent(event), this.options.stallMs, () => {
      this.options.log.info({ buffered: this.res.writableLength }, 'closing an SSE client that stopped reading');
      this.drop();
    });
  }

  end(): void {
    clearInterval(this.heartbeat);
    this.unregister();
    if (!this.res.writableEnded && !this.res.destroyed) this.res.end();
    this.abort.abort();
  }

  /** Drops the connection without flushing: a client that does not read would keep the buffer forever. */
  private drop(): void {
    clearInterval(this.heartbeat);
    this.unregister();
    this.res.destroy();
    this.abort.abort();
  }
}
