/**
 * JSON over HTTP to a Berth server with a bearer token; error bodies become BerthApiError. A request the server
 * refused for its pace (`rate_limited`: nothing was done) is sent again after the wait it names, when its body can be.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthApiError } from './berth-api-error.ts';
import { DirectHttp, type DirectAnswer } from './direct-http.ts';

export interface RequestOptions {
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  /** Bytes instead of a JSON `body`: a stream sent as it is produced (an archive), or one buffer sent whole. */
  bytes?: { stream: AsyncIterable<Uint8Array> | Uint8Array; contentType: string };
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Set on the one repeat of a request at the runtime that owns its resource: it is not sent on again. */
  ownerFollowed?: boolean;
}

/** Whether the request's body can be sent again (none, JSON, or one buffer; not a stream already consumed). */
const resendable = (options: RequestOptions): boolean => !options.bytes || options.bytes.stream instanceof Uint8Array;

/**
 * Where to repeat a request another runtime sharing the store owns (`owned_elsewhere` with `detail.url`): once, with
 * a body that can be sent again, and never from https down to http (the token goes with it).
 */
function ownerUrl(error: BerthApiError, baseUrl: string, options: RequestOptions): string | undefined {
  const url = error.code === 'owned_elsewhere' ? error.detail.url : undefined;
  if (typeof url !== 'string' || options.ownerFollowed || !resendable(options)) return undefined;
  const scheme = /^(https?):\/\//.exec(url)?.[1];
  if (!scheme || (baseUrl.startsWith('https:') && scheme !== 'https')) return undefined;
  return url;
}

/** How long one request waits out `rate_limited` answers before the error reaches its caller. */
const RATE_WAIT_MS = 60_000;

/** The wait a `rate_limited` answer asks for, where the request can be sent again as it was (its body is not a stream). */
function rateWait(error: unknown, options: RequestOptions): number | undefined {
  if (!(error instanceof BerthApiError) || error.code !== 'rate_limited' || !resendable(options)) return undefined;
  const ms = Number(error.detail.retry_after_ms);
  return Number.isFinite(ms) && ms >= 0 ? ms : 1000;
}

/** The largest JSON answer read directly (a file write's answer is a few hundred bytes). */
const JSON_ANSWER_BYTES = 16 * 1024 * 1024;

export class HttpTransport {
  readonly baseUrl: string;
  private readonly direct = new DirectHttp();

  constructor(
    baseUrl: string,
    private readonly token: string,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  url(path: string, query: RequestOptions['query'] = {}): string {
    const url = new URL(this.baseUrl + path);
    for (const [key, value] of Object.entries(query)) if (value !== undefined) url.searchParams.set(key, String(value));
    return url.toString();
  }

  /** The WebSocket URL of a path (ws:// or wss://). */
  wsUrl(path: string, query: RequestOptions['query'] = {}): string {
    return this.url(path, query).replace(/^http/, 'ws');
  }

  get authorization(): string {
    return `Bearer ${this.token}`;
  }

  /** A raw response; a non-2xx answer is thrown as BerthApiError. */
  send(method: string, path: string, options: RequestOptions = {}): Promise<Response> {
    return this.paced(options, () => this.sendOnce(method, path, options));
  }

  /** `attempt` again while the server answers `rate_limited` and the wait it names fits in RATE_WAIT_MS. */
  private async paced<T>(options: RequestOptions, attempt: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + RATE_WAIT_MS;
    for (;;) {
      try {
        return await attempt();
      } catch (error) {
        const wait = rateWait(error, options);
        if (wait === undefined || Date.now() + wait > deadline) throw error;
        await sleep(wait, undefined, { signal: options.signal }).catch(() => Promise.reject(error));
      }
    }
  }

  private async sendOnce(method: string, path: string, options: RequestOptions): Promise<Response> {
    const init: RequestInit & { duplex?: 'half' } = { method, headers: this.headersOf(options), signal: options.signal };
    if (options.bytes) {
      const { stream } = options.bytes;
      if (stream instanceof Uint8Array) init.body = stream as Uint8Array<ArrayBuffer>;
      else {
        // fetch streams an async iterable body; it requires half duplex for a body it cannot measure.
        init.body = stream as unknown as BodyInit;
        init.duplex = 'half';
      }
    } else if (options.body !== undefined) {
      init.body = JSON.stringify(options.body);
    }
    const response = await fetch(this.url(path, options.query), init);
    if (!response.ok) {
      const error = BerthApiError.fromBody(response.status, await response.text());
      const owner = ownerUrl(error, this.baseUrl, options);
      if (owner) return new HttpTransport(owner, this.token).send(method, path, { ...options, ownerFollowed: true });
      throw error;
    }
    return response;
  }

  /**
   * The body of a GET (at most `maxBytes` of it) and its headers: read straight into one buffer where the answer is
   * the plain case (direct-get.ts), else through `send`, which also answers every error.
   */
  async bytes(path: string, options: RequestOptions, maxBytes: number): Promise<DirectAnswer> {
    // Any other answer (an error, a larger body), or a failure, is asked again through fetch: a GET may be repeated.
    const direct = await this.directly('GET', path, options, undefined, maxBytes).catch(() => undefined);
    if (direct?.status === 200) return direct;
    const response = await this.send('GET', path, options);
    const body = Buffer.from(await response.arrayBuffer());
    return { status: response.status, body, header: (name) => response.headers.get(name) };
  }

  /** Over a kept plain-HTTP connection (direct-http.ts): undefined where that cannot send the request. */
  private directly(method: string, path: string, options: RequestOptions, body: Uint8Array | undefined, maxBytes: number): Promise<DirectAnswer | undefined> {
    return this.direct.request(method, new URL(this.url(path, options.query)), this.headersOf(options), body, maxBytes, options.signal);
  }

  /** The request's headers: the token, the caller's, and the type of its body (bytes' own, or JSON). */
  private headersOf(options: RequestOptions): Record<string, string> {
    const headers: Record<string, string> = { authorization: this.authorization, ...options.headers };
    if (options.bytes) headers['content-type'] = options.bytes.contentType;
    else if (options.body !== undefined) headers['content-type'] = 'application/json';
    return headers;
  }

  /**
   * A JSON answer. The request goes directly where it can (plain http, a body of one buffer or JSON, or none): fetch
   * spends about 0.5 ms more of the caller's CPU per request (a GET of an execution record on loopback: 0.63 ms by
   * fetch, 0.29 ms directly, of which the server's part is 0.15 ms). A GET whose answer the direct way refuses (not
   * sized by one content-length) is asked again through fetch; any request it cannot send at all goes through fetch.
   */
  json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    return this.paced(options, () => this.jsonOnce<T>(method, path, options));
  }

  private async jsonOnce<T>(method: string, path: string, options: RequestOptions): Promise<T> {
    const direct = await this.directJson(method, path, options);
    if (direct) {
      if (direct.status >= 200 && direct.status < 300) return (direct.status === 204 ? undefined : JSON.parse(direct.body.toString())) as T;
      const error = BerthApiError.fromBody(direct.status, direct.body.toString());
      const owner = ownerUrl(error, this.baseUrl, options);
      if (owner) return new HttpTransport(owner, this.token).json(method, path, { ...options, ownerFollowed: true });
      throw error;
    }
    const response = await this.sendOnce(method, path, options);
    if (response.status === 204) return undefined as T;
    return (await response.json()) as T;
  }

  private directJson(method: string, path: string, options: RequestOptions): Promise<DirectAnswer | undefined> {
    if (!resendable(options)) return Promise.resolve(undefined); // a stream: fetch sends it
    const body = options.bytes ? (options.bytes.stream as Uint8Array) : options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : undefined;
    const answer = this.directly(method, path, options, body, JSON_ANSWER_BYTES);
    return method === 'GET' ? answer.catch(() => undefined) : answer;
  }
}
