/**
 * Requests whose body is one buffer (or none) and whose answer's body the kernel reads straight into one buffer of its
 * content-length, over kept-alive plain HTTP/1.1 connections. fetch (and node:http) read a body in 64 KiB pieces,
 * each a fresh allocation passed through streams, then copy them all into one more, and fetch sends a buffer in
 * pieces too: for 4 MiB that is 4 to 20 ms on the machines this project is measured on, against 1 to 2 ms here.
 * Only the plain case is taken: http (not https), an answer sized by one `content-length` and nothing else framing
 * it. A request this cannot send answers undefined (the caller uses fetch); a connection that fails throws a
 * TypeError, as fetch does (`fetch failed`, the socket's error as its cause).
 */
import { connect, type Socket } from 'node:net';

export interface DirectAnswer {
  status: number;
  body: Buffer;
  /** A header of the answer (lower-case name), or null. */
  header(name: string): string | null;
}

/** The most a status line and headers may take. */
const HEAD_BYTES = 16 * 1024;
/** Idle connections kept per origin. */
const IDLE_PER_ORIGIN = 4;
/** Methods HTTP calls idempotent: sent again on a new connection when a kept one turns out closed. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);
/**
 * The longest a kept connection may have been idle to carry a request that is not sent again (a POST): a server
 * closes idle connections after its keep-alive timeout (5 s by node's default), and a request written as it does so
 * is lost. Past this a new connection is opened.
 */
const SAFE_IDLE_MS = 1_000;
/**
 * How long a request waits with no byte of its answer coming: fetch's own bound (undici's headers and body timeouts,
 * 300 s each), so a server that hangs fails the call as it would through fetch. Long polls end well within it.
 */
export const ANSWER_IDLE_MS = 300_000;
const HEAD_END = Buffer.from('\r\n\r\n');

/** A request that got no answer, in fetch's shape (its message, the reason as `cause`, a socket error's code too). */
const failed = (why: string | Error): TypeError =>
  new TypeError('fetch failed', { cause: typeof why === 'string' ? new Error(`direct request: ${why}`) : why });

/** A timeout's cause carries undici's code for it, so a caller tells the two apart as it would through fetch. */
const timedOut = (code: 'UND_ERR_HEADERS_TIMEOUT' | 'UND_ERR_BODY_TIMEOUT', ms: number): TypeError =>
  failed(Object.assign(new Error(`direct request: no ${code === 'UND_ERR_HEADERS_TIMEOUT' ? 'answer' : 'more of the answer\'s body'} for ${ms} ms`), { code }));

/** One connection; one request at a time. */
class Connection {
  readonly socket: Socket;
  private head = Buffer.allocUnsafe(HEAD_BYTES);
  private headFilled = 0;
  private status = 0;
  private body: Buffer | undefined;
  private bodyFilled = 0;
  private headers = new Map<string, string>();
  private pending: { resolve: (answer: DirectAnswer) => void; reject: (error: unknown) => void } | undefined;
  private maxBytes = 0;
  private signal: AbortSignal | undefined;
  private readonly abort = () => this.fail(this.signal?.reason ?? failed('aborted'));
  /** Called once the connection is closed (the pool lets it go). */
  onClose: (() => void) | undefined;
  /** Whether any byte of the current answer came: a kept connection closed before that is tried again. */
  answered = false;
  reusable = true;
  /** When the connection was last kept idle (performance.now()). */
  idleSince = 0;

  constructor(host: string, port: number, idleMs: number) {
    this.socket = connect({
      host,
      port,
      noDelay: true,
      onread: { buffer: () => this.nextBuffer(), callback: (bytes: number) => this.onRead(bytes) },
    });
    this.socket.on('error', (e) => this.fail(failed(e)));
    // Counts only while a request waits (a kept idle connection has none to fail).
    this.socket.setTimeout(idleMs, () => {
      if (this.pending) this.fail(timedOut(this.body ? 'UND_ERR_BODY_TIMEOUT' : 'UND_ERR_HEADERS_TIMEOUT', idleMs));
    });
    this.socket.on('close', () => {
      this.fail(failed('the connection closed'));
      this.onClose?.();
    });
  }

  request(head: string, body: Uint8Array | undefined, maxBytes: number, signal?: AbortSignal): Promise<DirectAnswer> {
    this.headFilled = 0;
    this.body = undefined;
    this.bodyFilled = 0;
    this.headers = new Map();
    this.answered = false;
    this.maxBytes = maxBytes;
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      if (signal?.aborted) return this.fail(signal.reason);
      this.signal = signal;
      signal?.addEventListener('abort', this.abort, { once: true });
      this.socket.ref();
      this.socket.write(head);
      if (body && body.length > 0) this.socket.write(body);
    });
  }

  private fail(error: unknown): void {
    this.reusable = false;
    this.socket.destroy();
    const pending = this.settled();
    pending?.reject(error);
  }

  private refuse(why: string): false {
    this.fail(failed(why));
    return false;
  }

  private settled() {
    const pending = this.pending;
    this.pending = undefined;
    this.signal?.removeEventListener('abort', this.abort);
    this.signal = undefined;
    this.socket.unref();
    return pending;
  }

  /**
   * Where the kernel puts the next bytes (asked after each read): the body's unfilled rest once its size is known,
   * else the head's; between requests the head from its start, where the next answer begins.
   */
  private nextBuffer(): Uint8Array {
    if (!this.pending) return this.head;
    if (this.body && this.bodyFilled < this.body.length) return this.body.subarray(this.bodyFilled);
    if (this.headFilled < HEAD_BYTES) return this.head.subarray(this.headFilled);
    return this.head; // overrun: onRead fails the request
  }

  private onRead(bytes: number): boolean {
    this.answered = true;
    if (!this.pending) {
      this.fail(undefined); // bytes nobody asked for
      return false;
    }
    if (this.body) {
      this.bodyFilled += bytes;
    } else {
      this.headFilled += bytes;
      const end = this.head.subarray(0, this.headFilled).indexOf(HEAD_END);
      if (end < 0) return this.headFilled < HEAD_BYTES || this.refuse('the answer\'s head is too large');
      const size = this.parseHead(this.head.toString('latin1', 0, end));
      if (size === undefined) return this.refuse('the answer is not sized by one content-length');
      if (size > this.maxBytes) return this.refuse(`the answer is larger than ${this.maxBytes} bytes`);
      if (this.headFilled - end - 4 > size) return this.refuse('more bytes than the answer\'s content-length');
      this.body = Buffer.allocUnsafe(size);
      this.bodyFilled = this.head.copy(this.body, 0, end + 4, this.headFilled);
    }
    if (this.bodyFilled === this.body.length) {
      const { status, body, headers } = this;
      this.settled()?.resolve({ status, body, header: (name) => headers.get(name) ?? null });
    }
    return true;
  }

  /** The body's size when the head is the plain case (one content-length, no other framing, or a status that has no
   * body), else undefined. */
  private parseHead(head: string): number | undefined {
    const [statusLine, ...lines] = head.split('\r\n');
    const status = /^HTTP\/1\.1 (\d{3}) /.exec(statusLine ?? '')?.[1];
    if (!status) return undefined;
    this.status = Number(status);
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon <= 0) return undefined;
      const name = line.slice(0, colon).trim().toLowerCase();
      if (this.headers.has(name)) return undefined; // a repeated header (two lengths, say) is not the plain case
      this.headers.set(name, line.slice(colon + 1).trim());
    }
    if (this.headers.has('transfer-encoding')) return undefined;
    if ((this.headers.get('connection') ?? '').toLowerCase() === 'close') this.reusable = false;
    if (this.status === 204 || this.status === 304) return 0; // never a body, whatever the headers say
    const length = this.headers.get('content-length') ?? '';
    return /^\d{1,15}$/.test(length) ? Number(length) : undefined;
  }
}

export class DirectHttp {
  private readonly idle = new Map<string, Connection[]>();

  /** `answerIdleMs`: how long a request may wait with no byte of its answer coming (fetch's 300 s by default). */
  constructor(private readonly answerIdleMs = ANSWER_IDLE_MS) {}

  /**
   * `method` `url` with `body`, answered with a body of at most `maxBytes`; undefined when it is not a request this
   * sends (not http, a header that would split the request).
   */
  async request(
    method: string,
    url: URL,
    headers: Record<string, string>,
    body: Uint8Array | undefined,
    maxBytes: number,
    signal?: AbortSignal,
  ): Promise<DirectAnswer | undefined> {
    if (url.protocol !== 'http:') return undefined;
    const lines = [`${method} ${url.pathname}${url.search} HTTP/1.1`, `host: ${url.host}`, 'connection: keep-alive'];
    if (body) lines.push(`content-length: ${body.length}`);
    for (const [name, value] of Object.entries(headers)) {
      if (/[\r\n]/.test(name + value)) return undefined; // never a header that would split the request
      lines.push(`${name}: ${value}`);
    }
    const head = `${lines.join('\r\n')}\r\n\r\n`;
    const origin = url.host;
    const idempotent = IDEMPOTENT.has(method);
    // A kept connection the server closed just before (its idle timeout) never saw the request: one try on a new
    // one then, for a request HTTP calls idempotent; any other goes only on a connection idle too briefly for that.
    for (let fresh = false; ; fresh = true) {
      const kept = fresh ? undefined : this.take(origin, idempotent ? Infinity : SAFE_IDLE_MS);
      const connection = kept ?? new Connection(url.hostname.replace(/^\[|\]$/g, ''), Number(url.port || 80), this.answerIdleMs);
      try {
        const answer = await connection.request(head, body, maxBytes, signal);
        if (connection.reusable) this.keep(origin, connection);
        else connection.socket.destroy();
        return answer;
      } catch (e) {
        if (!kept || !idempotent || connection.answered || signal?.aborted) throw e;
      }
    }
  }

  /** The connection to `origin` kept last, if it has been idle less than `maxIdleMs` (older ones are closed). */
  private take(origin: string, maxIdleMs: number): Connection | undefined {
    const list = this.idle.get(origin) ?? [];
    const kept = list.pop();
    if (!kept || performance.now() - kept.idleSince < maxIdleMs) return kept;
    // The rest were kept before it: none is young enough either.
    for (const connection of [kept, ...list.splice(0)]) connection.socket.destroy();
    return undefined;
  }

  private keep(origin: string, connection: Connection): void {
    const list = this.idle.get(origin) ?? [];
    if (list.length >= IDLE_PER_ORIGIN) return void connection.socket.destroy();
    connection.idleSince = performance.now();
    list.push(connection);
    this.idle.set(origin, list);
    connection.onClose = () => {
      const at = list.indexOf(connection);
      if (at >= 0) list.splice(at, 1);
    };
  }
}
