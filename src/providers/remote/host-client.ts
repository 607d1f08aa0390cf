/**
 * The control plane's side of the Execution Host protocol (schemas/host-protocol.ts): calls to one configured host
 * over its Unix socket or HTTPS (its own CA), with the bearer credential read from the admin's file. The protocol
 * version is exchanged (GET /v1/hello) before the first dispatch and again after the host was unreachable, so a
 * mismatched host is refused before anything is sent to it. A host that does not answer is `unavailable`;
 * `provider_unavailable` when the call provably never reached it.
 */
import { readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { z } from 'zod';
import { BerthError, errorCodes, type ErrorCode } from '../../../schemas/errors.ts';
import { helloSchema, HOST_PROTOCOL_VERSION, PROTOCOL_HEADER, READ_CLOSED_HEADER, READ_NEXT_HEADER, type Hello } from '../../../schemas/host-protocol.ts';
import { openByteStream, type ByteSink, type ByteSource } from './byte-stream.ts';

export interface RemoteHostConfig {
  name: string;
  /** `https://host:port` (TLS), or absent with `socketPath`. */
  url?: string;
  socketPath?: string;
  /** The bearer secret's file (absent when the client certificate alone admits, over TLS). */
  credentialFile?: string;
  /** PEM file of the CA that signed the host's certificate (default: the system's). */
  caFile?: string;
  /** The client certificate and key presented to a host started with --tls-client-ca (mTLS). */
  clientCertFile?: string;
  clientKeyFile?: string;
}

/** Errors of a connection that never reached the host: nothing was sent. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOENT', 'EHOSTUNREACH', 'ENETUNREACH', 'EACCES', 'ENOTFOUND', 'EAI_AGAIN']);
const CALL_TIMEOUT_MS = 30_000;

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

export class HostClient {
  private readonly agent: http.Agent;
  private readonly credential?: string;
  private hello?: Promise<Hello>;

  constructor(
    readonly config: RemoteHostConfig,
    /** The version this side speaks (tests pass another to see the refusal). */
    private readonly protocol = HOST_PROTOCOL_VERSION,
  ) {
    if (config.credentialFile) this.credential = readFileSync(config.credentialFile, 'utf8').trim();
    // noDelay: on a kept-alive TCP connection Nagle holds a call's small request until the host acknowledges the
    // tail of the previous body, which it delays up to 40 ms (curl, fetch and Go's client disable it too).
    this.agent = config.url ? new https.Agent({ keepAlive: true, noDelay: true, ...tlsOptions(config) }) : new http.Agent({ keepAlive: true });
  }

  /** The host's version and incarnation, asked once per reachable spell; a mismatch refuses every call. */
  async handshake(): Promise<Hello> {
    if (!this.hello) {
      // Once per reachable spell, as the version: not a look at the disk before every call.
      if (this.config.socketPath) this.checkSocketDirectory(this.config.socketPath);
      this.hello = this.request('GET', '/v1/hello').then((a) => helloSchema.parse(JSON.parse(a.body.toString('utf8'))));
    }
    let hello: Hello;
    try {
      hello = await this.hello;
    } catch (e) {
      this.hello = undefined;
      throw e;
    }
    if (hello.protocol !== this.protocol) {
      this.hello = undefined;
      throw new BerthError('invalid_request', `The host ${this.config.name} speaks protocol ${hello.protocol}, this control plane ${this.protocol}.`, {
        reason: 'protocol_mismatch',
        host: this.config.name,
        hostProtocol: hello.protocol,
        protocol: this.protocol,
      });
    }
    return hello;
  }

  async call<S extends z.ZodType>(path: string, body: unknown, schema: S, timeoutMs = CALL_TIMEOUT_MS): Promise<z.infer<S>> {
    await this.handshake();
    const answer = await this.request('POST', path, body, timeoutMs);
    return schema.parse(JSON.parse(answer.body.toString('utf8')));
  }

  /** A call answered with raw bytes (read): its body (received straight into `into` when it fits) and headers. */
  async bytes(path: string, body: unknown, into?: Buffer): Promise<{ data: Buffer; next: number; closed: boolean }> {
    await this.handshake();
    const answer = await this.request('POST', path, body, CALL_TIMEOUT_MS, into);
    return { data: answer.body, next: Number(answer.headers[READ_NEXT_HEADER]), closed: answer.headers[READ_CLOSED_HEADER] === '1' };
  }

  /**
   * A call whose body is `upload` and whose answer is a long body (the file calls' framed bodies, both ways:
   * schemas/framed-body.ts): the response once the host accepted the call, its body unread. No idle timeout: the
   * reader decides when a silent body is dead.
   */
  async open(path: string, upload: AsyncIterable<Buffer>): Promise<http.IncomingMessage> {
    await this.handshake();
    return new Promise((resolve, reject) => {
      const req = this.send('POST', path, undefined, 0, upload);
      req.on('error', (e: NodeJS.ErrnoException) => reject(this.unreachable(e)));
      req.on('response', (res) => {
        if (res.statusCode === 200) return resolve(res);
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => req.emit('error', e));
        res.on('end', () => reject(hostError(this.config.name, { status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) })));
      });
    });
  }

  /** The byte stream of a call on a connection of its own, read into one reused buffer (byte-stream.ts says why). */
  async stream(path: string, body: unknown, sink: ByteSink): Promise<ByteSource> {
    await this.handshake();
    const url = this.config.url ? new URL(this.config.url) : undefined;
    const head = [
      `POST ${path} HTTP/1.1`,
      `host: ${url?.host ?? 'localhost'}`,
      'content-type: application/json',
      `${PROTOCOL_HEADER}: ${this.protocol}`,
      ...(this.credential ? [`authorization: Bearer ${this.credential}`] : []),
    ].join('\r\n');
    const connect = url ? { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 443), tls: tlsOptions(this.config) } : { socketPath: this.config.socketPath! };
    return openByteStream(
      { connect, head, body: Buffer.from(JSON.stringify(body)), refused: (answer) => hostError(this.config.name, answer), unreachable: (e) => this.unreachable(e) },
      sink,
    );
  }

  close(): void {
    this.agent.destroy();
  }

  /**
   * Every call sends the credential to whatever listens at the socket's path: in a directory others may write (a
   * sticky /tmp included), anyone could listen there once the host is gone and be sent it. Refused before anything
   * is sent; the directory's owner (root, the host's user) is trusted as the admin configured it.
   */
  private checkSocketDirectory(socketPath: string): void {
    const dir = path.dirname(path.resolve(socketPath));
    let mode: number;
    try {
      mode = statSync(dir).mode;
    } catch {
      return; // no directory: the connection fails as unreachable, and nothing is sent
    }
    if ((mode & 0o022) !== 0) {
      throw new BerthError(
        'provider_unavailable',
        `The host ${this.config.name}'s socket is in ${dir}, which others may write: anyone could listen there and be sent the credential. Put it in a directory only its owner writes (e.g. /run/berth).`,
        { host: this.config.name, reason: 'socket_directory_writable' },
      );
    }
  }

  private send(method: string, path: string, body: unknown, timeoutMs: number, upload?: AsyncIterable<Buffer>): http.ClientRequest {
    const payload = body === undefined || upload ? undefined : Buffer.from(JSON.stringify(body));
    const headers: http.OutgoingHttpHeaders = {
      ...(this.credential ? { authorization: `Bearer ${this.credential}` } : {}),
      [PROTOCOL_HEADER]: String(this.protocol),
      ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}),
      ...(upload ? { 'content-type': 'application/octet-stream' } : {}),
    };
    const options: http.RequestOptions = { method, headers, agent: this.agent, timeout: timeoutMs };
    const req = this.config.url ? https.request(new URL(path, this.config.url), options) : http.request({ ...options, socketPath: this.config.socketPath, path });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' })));
    if (upload) pipeline(Readable.from(upload), req).catch((e: Error) => req.destroy(e));
    else req.end(payload);
    return req;
  }

  /** Unreachable: the next call asks for the version again (the host may come back as another build). */
  private unreachable(e: NodeJS.ErrnoException): BerthError {
    this.hello = undefined;
    const code: ErrorCode = NOT_SENT.has(e.code ?? '') ? 'provider_unavailable' : 'unavailable';
    return new BerthError(code, `The host ${this.config.name} does not answer (${e.code ?? e.message}).`, { host: this.config.name, cause: e.code ?? null });
  }

  private request(method: string, path: string, body?: unknown, timeoutMs = CALL_TIMEOUT_MS, into?: Buffer): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const req = this.send(method, path, body, timeoutMs);
      req.on('error', (e: NodeJS.ErrnoException) => reject(this.unreachable(e)));
      req.on('response', (res) => {
        const length = Number(res.headers['content-length']);
        // A body that fits the caller's buffer is received into it: no list of chunks, no copy after.
        const target = into && res.statusCode === 200 && length <= into.length ? into : undefined;
        let received = 0;
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => {
          if (target) target.set(c, received);
          else chunks.push(c);
          received += c.length;
        });
        res.on('error', (e) => req.emit('error', e));
        res.on('end', () => {
          const answer = { status: res.statusCode ?? 0, headers: res.headers, body: target ? target.subarray(0, received) : Buffer.concat(chunks) };
          if (answer.status >= 200 && answer.status < 300) return resolve(answer);
          reject(hostError(this.config.name, answer));
        });
      });
    });
  }
}

/** The host's CA and, for mTLS, this side's client certificate and key (private: like the credential). */
export function tlsOptions(config: RemoteHostConfig): https.AgentOptions {
  return {
    ...(config.caFile ? { ca: readFileSync(config.caFile) } : {}),
    ...(config.clientCertFile ? { cert: readFileSync(config.clientCertFile) } : {}),
    ...(config.clientKeyFile ? { key: readFileSync(config.clientKeyFile) } : {}),
  };
}

/** The host's typed error as it sent it; anything else it answered becomes `unavailable`. */
function hostError(host: string, answer: Answer): BerthError {
  try {
    const { error } = JSON.parse(answer.body.toString('utf8')) as { error: { code: string; message: string; detail?: Record<string, unknown> } };
    if (Object.hasOwn(errorCodes, error.code)) return new BerthError(error.code as ErrorCode, error.message, { ...error.detail, host });
  } catch {
    // Not a Berth error body: fall through.
  }
  return new BerthError('unavailable', `The host ${host} answered ${answer.status}.`, { host, status: answer.status });
}
