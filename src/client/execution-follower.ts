/**
 * Follows one execution over the gateway WebSocket until its terminal status, reconnecting transparently from the
 * last cursor of each stream when the connection drops (1013, a restart, a network fault): every byte is delivered
 * once, in order. Stdin is sent over whichever connection is open; a chunk in flight when a connection drops may be
 * lost (at most once), `end` is repeated on every new connection once the input is exhausted (it is idempotent).
 * Terminal sizes from `sizes` are sent as resize controls, and the latest one again on every new connection.
 */
import { WebSocket, type RawData } from 'ws';
import { wsServerTextSchema, type ExecutionRecordJson } from '../../schemas/api.ts';
import type { OutputStream } from '../../schemas/output.ts';
import { terminalStatuses } from '../../schemas/states.ts';
import { decodeOutputFrame } from '../../schemas/ws-frames.ts';
import { BerthApiError } from './berth-api-error.ts';
import type { HttpTransport } from './http-transport.ts';
import { Backoff, type BackoffOptions } from './reconnect-backoff.ts';

export type StdinSource = string | Uint8Array | AsyncIterable<string | Uint8Array> | Iterable<string | Uint8Array>;
export interface TerminalSize {
  cols: number;
  rows: number;
}

export interface FollowOptions {
  onStdout?: (chunk: Buffer) => void;
  onStderr?: (chunk: Buffer) => void;
  onPty?: (chunk: Buffer) => void;
  onStatus?: (record: ExecutionRecordJson) => void;
  stdin?: StdinSource;
  /** New sizes of the execution's terminal (a PTY execution), e.g. one per SIGWINCH. */
  sizes?: AsyncIterable<TerminalSize>;
  /** Start cursors (default 0 each). */
  cursors?: Partial<Record<OutputStream, number>>;
  signal?: AbortSignal;
  backoff?: BackoffOptions;
}

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

type Attempt = { done: ExecutionRecordJson } | { dropped: unknown; delivered: boolean };

const chunksOf = async function* (source: StdinSource): AsyncGenerator<Uint8Array> {
  if (typeof source === 'string') return yield Buffer.from(source);
  if (source instanceof Uint8Array) return yield source;
  for await (const chunk of source as AsyncIterable<string | Uint8Array>) {
    yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
  }
};

export async function followExecution(http: HttpTransport, id: string, options: FollowOptions = {}): Promise<ExecutionRecordJson> {
  const cursors: Record<OutputStream, number> = { stdout: 0, stderr: 0, pty: 0, ...options.cursors };
  const sinks: Record<OutputStream, ((chunk: Buffer) => void) | undefined> = {
    stdout: options.onStdout,
    stderr: options.onStderr,
    pty: options.onPty,
  };
  const backoff = new Backoff(options.backoff);
  const stdin = new StdinPump(options.stdin);
  const sizes = new SizePump(options.sizes);

  const attempt = (): Promise<Attempt> =>
    new Promise((resolve) => {
      let last: ExecutionRecordJson | undefined;
      let delivered = false;
      let failure: unknown;
      const ws = new WebSocket(http.wsUrl(`/v1/executions/${encodeURIComponent(id)}/stream`, cursors), {
        headers: { authorization: http.authorization },
        perMessageDeflate: false,
      });
      const onAbort = () => ws.terminate();
      options.signal?.addEventListener('abort', onAbort, { once: true });
      ws.on('unexpected-response', (_request, response) => {
        const parts: Buffer[] = [];
        response.on('data', (part: Buffer) => parts.push(part));
        response.on('end', () => {
          failure = BerthApiError.fromBody(response.statusCode ?? 500, Buffer.concat(parts).toString('utf8'));
          ws.terminate();
        });
      });
      ws.on('error', (error) => (failure ??= error));
      ws.on('open', () => {
        stdin.attach(ws);
        sizes.attach(ws);
      });
      ws.on('message', (data: RawData, isBinary: boolean) => {
        delivered = true;
        if (isBinary) return deliver(ws, data as Buffer);
        const text = wsServerTextSchema.safeParse(parseJson(data.toString()));
        if (!text.success) return;
        if (text.data.type === 'error') {
          const { code, message, detail } = text.data.error;
          failure = BerthApiError.fromCode(code, message, detail);
          return;
        }
        const { type: _type, ...record } = text.data;
        last = record as ExecutionRecordJson;
        options.onStatus?.(last);
      });
      ws.on('close', (code) => {
        stdin.detach(ws);
        sizes.detach(ws);
        options.signal?.removeEventListener('abort', onAbort);
        if (code === 1000 && last && terminalStatuses.has(last.status)) resolve({ done: last });
        else resolve({ dropped: failure ?? new Error(`execution stream closed with ${code}`), delivered });
      });
    });

  const deliver = (ws: WebSocket, frame: Buffer) => {
    const { stream, cursor, data } = decodeOutputFrame(frame);
    const have = cursors[stream];
    if (cursor > have) {
      // A gap would lose bytes: drop this connection and ask again from what we hold.
      ws.terminate();
      return;
    }
    const fresh = data.subarray(Math.min(have - cursor, data.length));
    if (fresh.length === 0) return;
    cursors[stream] = have + fresh.length;
    sinks[stream]?.(Buffer.from(fresh));
  };

  try {
    for (;;) {
      if (options.signal?.aborted) throw options.signal.reason;
      const result = await attempt();
      if ('done' in result) return result.done;
      if (options.signal?.aborted) throw options.signal.reason;
      if (result.dropped instanceof BerthApiError && !result.dropped.retryable && result.dropped.status < 500) throw result.dropped;
      if (result.delivered) backoff.reset();
      await backoff.wait(result.dropped, options.signal);
    }
  } finally {
    stdin.stop();
    sizes.stop();
  }
}

/** Feeds stdin chunks to the current connection, one after another; waits while there is none. */
class StdinPump {
  private ws: WebSocket | undefined;
  private wake: (() => void) | undefined;
  private exhausted = false;
  private stopped = false;

  constructor(private readonly source: StdinSource | undefined) {
    if (source !== undefined) void this.run().catch(() => undefined);
  }

  attach(ws: WebSocket): void {
    this.ws = ws;
    if (this.exhausted) ws.send(JSON.stringify({ type: 'end' }));
    this.wake?.();
  }

  detach(ws: WebSocket): void {
    if (this.ws === ws) this.ws = undefined;
  }

  stop(): void {
    this.stopped = true;
    this.wake?.();
  }

  private async open(): Promise<WebSocket | undefined> {
    while (!this.stopped && this.ws?.readyState !== WebSocket.OPEN) await new Promise<void>((r) => (this.wake = r));
    return this.stopped ? undefined : this.ws;
  }

  private async run(): Promise<void> {
    for await (const chunk of chunksOf(this.source!)) {
      const ws = await this.open();
      if (!ws) return;
      await new Promise<void>((resolve) => ws.send(chunk, () => resolve()));
    }
    this.exhausted = true;
    (await this.open())?.send(JSON.stringify({ type: 'end' }));
  }
}

/** Sends each new terminal size over the current connection, and the latest one to every new connection. */
class SizePump {
  private ws: WebSocket | undefined;
  private latest: TerminalSize | undefined;
  private stopped = false;

  constructor(private readonly source: AsyncIterable<TerminalSize> | undefined) {
    if (source !== undefined) void this.run().catch(() => undefined);
  }

  attach(ws: WebSocket): void {
    this.ws = ws;
    if (this.latest) this.send();
  }

  detach(ws: WebSocket): void {
    if (this.ws === ws) this.ws = undefined;
  }

  stop(): void {
    this.stopped = true;
  }

  private send(): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify({ type: 'resize', ...this.latest }));
  }

  private async run(): Promise<void> {
    for await (const size of this.source!) {
      if (this.stopped) return;
      this.latest = { cols: size.cols, rows: size.rows };
      this.send();
    }
  }
}
