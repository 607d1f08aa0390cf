/**
 * `berth host`'s server: the Execution Host protocol (schemas/host-protocol.ts) over node:http, on a Unix socket
 * (mode 0600) and/or HTTPS. It is its own layer beside the gateway, not part of it: it composes a provider (native)
 * directly and serves the provider port to one control plane, where the gateway serves the runtime to tenants; so it
 * shares no route, auth or tenant model with the gateway, and nothing of the runtime is loaded on a host.
 */
import { chmod, mkdir, readFile, rm, stat } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import type { z } from 'zod';
import { BerthError, isBerthError } from '../../schemas/errors.ts';
import {
  allocateCallSchema,
  execCallSchemas,
  HOST_PROTOCOL_VERSION,
  PROTOCOL_HEADER,
  READ_CLOSED_HEADER,
  READ_NEXT_HEADER,
  refCallSchema,
  type ExecOp,
  type FilesOp,
} from '../../schemas/host-protocol.ts';
import type { DockerProviderOptions } from '../providers/docker/docker-provider.ts';
import { checkProtocol, parsed } from './host-call.ts';
import { hostAuth, hostSecrets } from './host-credential.ts';
import { hostUpgrade } from './host-ws.ts';
import { HostAllocations } from './host-allocations.ts';
import { hostBackends } from './host-backends.ts';
import { HostDispatch } from './host-dispatch.ts';
import { HostFiles } from './host-files.ts';
import { HostViews } from './host-views.ts';
import { isLoopbackHost } from '../providers/loopback-host.ts';
import { DataDirLock } from '../store/data-dir-lock.ts';

export interface HostOptions {
  dataDir: string;
  /** The bearer secret callers present; optional only where client certificates admit every caller (TLS alone). */
  credentialFile?: string;
  socketPath?: string;
  /** `host:port`; anything but loopback needs `tls`. */
  listen?: { host: string; port: number };
  /** `clientCaPath`: callers must present a certificate this CA signed (`--tls-client-ca`). */
  tls?: { certPath: string; keyPath: string; clientCaPath?: string };
  /** Serve the `docker` backend on this machine's engine too (`berth host --docker`). */
  docker?: boolean | DockerProviderOptions;
  /** One line per fault (never a header or a body: the credential and commands' variables stay out of logs). */
  log?: (message: string) => void;
}

export interface RunningHost {
  incarnation: string;
  /** `unix:<path>` and/or `https://host:port`. */
  urls: string[];
  close(): Promise<void>;
}

/** Largest request body (stdin chunks are base64 in JSON). */
const MAX_BODY_BYTES = 8 << 20;

/** Everything that would make a start insecure is refused here, before any file, socket or provider is made. */
function refuseUnsafe(options: HostOptions): void {
  if (!options.socketPath && !options.listen) throw new BerthError('invalid_request', 'berth host needs --socket PATH and/or --listen HOST:PORT', { reason: 'no_listener' });
  if (options.listen && !options.tls && !isLoopbackHost(options.listen.host)) {
    throw new BerthError('invalid_request', `a listener on ${options.listen.host} (not loopback) needs --tls-cert and --tls-key`, { reason: 'plaintext_listener', host: options.listen.host });
  }
  if (options.tls?.clientCaPath && !options.listen) throw new BerthError('invalid_request', '--tls-client-ca needs --listen with --tls-cert and --tls-key', { reason: 'client_ca_without_tls' });
  if (!options.credentialFile && (options.socketPath || !options.tls?.clientCaPath)) {
    throw new BerthError('invalid_request', 'berth host needs --credential FILE (only a TLS listener with --tls-client-ca admits callers without it)', { reason: 'no_credential' });
  }
}

export async function startHost(options: HostOptions): Promise<RunningHost> {
  refuseUnsafe(options);
  const admits = hostAuth({ ...(options.credentialFile ? { credentialFile: options.credentialFile } : {}), clientCertificates: options.tls?.clientCaPath !== undefined });
  // One process per data directory: two hosts on one would run each other's commands' spools and allocations.
  await mkdir(options.dataDir, { recursive: true, mode: 0o700 }); // private, as the host's own folders in it
  const lock = await DataDirLock.acquire(options.dataDir, { name: 'Berth process', hint: 'stop it first, or give this host its own --data-dir' });
  try {
    return await serveHost(options, admits, lock);
  } catch (e) {
    await lock.release();
    throw e;
  }
}

async function serveHost(options: HostOptions, admits: ReturnType<typeof hostAuth>, lock: DataDirLock): Promise<RunningHost> {
  const allocations = new HostAllocations(options.dataDir);
  const log = options.log ?? (() => undefined);
  const backends = await hostBackends({ dataDir: options.dataDir, hidden: hostSecrets(options), docker: options.docker, log });
  const replayLog = { info: (_detail: object, message: string) => log(`host: ${message}`) };
  const dispatch = new HostDispatch(backends.providers, allocations, new HostViews(options.dataDir), replayLog);
  const upgrade = hostUpgrade(admits, dispatch, replayLog);
  const files = new HostFiles(options.dataDir, dispatch);
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    serve(req, res, admits, allocations.incarnation, dispatch, files).catch((e) => {
      const error = isBerthError(e) ? e : new BerthError('internal', 'The host failed to answer.');
      if (!isBerthError(e)) log(`host: ${req.method} ${req.url?.split('?')[0]}: ${(e as Error).message}`);
      if (!res.headersSent) res.writeHead(error.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(error.toBody()));
    });
  };
  const servers: Array<{ server: http.Server; sockets: Set<Socket> }> = [];
  const urls: string[] = [];
  const track = (server: http.Server, event: string) => {
    const sockets = new Set<Socket>();
    server.on(event, (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    server.on('upgrade', upgrade);
    servers.push({ server, sockets });
  };
  try {
    if (options.socketPath) {
      const server = http.createServer(handler);
      track(server, 'connection');
      await clearStaleSocket(options.socketPath);
      // Made 0600 as it is bound (no moment where another user may connect), and chmod'ed again to be sure.
      const umask = process.umask(0o177);
      try {
        await new Promise<void>((resolve, reject) => server.once('error', reject).listen(options.socketPath, resolve));
      } finally {
        process.umask(umask);
      }
      await chmod(options.socketPath, 0o600);
      urls.push(`unix:${options.socketPath}`);
    }
    if (options.listen) {
      const { host, port } = options.listen;
      const server = options.tls
        ? https.createServer({ cert: await readFile(options.tls.certPath), key: await readFile(options.tls.keyPath), ...(await clientCa(options.tls.clientCaPath)) }, handler)
        : http.createServer(handler);
      track(server, options.tls ? 'secureConnection' : 'connection');
      await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve));
      const bound = (server.address() as AddressInfo).port;
      urls.push(`${options.tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${bound}`);
    }
  } catch (e) {
    for (const { server } of servers) server.close();
    await backends.close();
    throw e;
  }
  return {
    incarnation: allocations.incarnation,
    urls,
    async close() {
      await Promise.all(
        servers.map(({ server, sockets }) => {
          const closed = new Promise<void>((resolve) => server.close(() => resolve()));
          for (const socket of sockets) socket.destroy();
          return closed;
        }),
      );
      await backends.close();
      await lock.release();
    },
  };
}

/** With a client CA, every TLS caller is asked for a certificate, checked by `hostAuth` (a typed refusal, not a reset). */
async function clientCa(path: string | undefined): Promise<https.ServerOptions> {
  return path ? { ca: await readFile(path), requestCert: true, rejectUnauthorized: false } : {};
}

/** A socket file left by a killed host is removed; one that still answers belongs to a running host and is refused. */
async function clearStaleSocket(path: string): Promise<void> {
  const info = await stat(path).catch(() => undefined);
  if (!info) return;
  if (!info.isSocket()) throw new BerthError('invalid_request', `${path} exists and is not a socket`, { reason: 'socket_path', path });
  const answers = await new Promise<boolean>((resolve) => {
    const probe = net.connect(path);
    probe.once('connect', () => (probe.destroy(), resolve(true)));
    probe.once('error', () => resolve(false));
  });
  if (answers) throw new BerthError('unavailable', `${path} is in use by another host`, { path });
  await rm(path);
}

function json(res: http.ServerResponse, value: unknown): void {
  const body = JSON.stringify(value ?? null);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

async function body(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new BerthError('body_too_large', 'The request body is too large.', { max_bytes: MAX_BODY_BYTES });
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new BerthError('invalid_request', 'The request body is not JSON.');
  }
}

/** Auth, then the protocol version, then the body's schema, then (in HostDispatch) the target's fence: only then a dispatch. */
async function serve(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  admits: (req: http.IncomingMessage) => void,
  incarnation: string,
  dispatch: HostDispatch,
  files: HostFiles,
): Promise<void> {
  admits(req);
  const path = (req.url ?? '').split('?')[0];
  if (req.method === 'GET' && path === '/v1/hello') return json(res, { protocol: HOST_PROTOCOL_VERSION, incarnation, backends: dispatch.backends });
  checkProtocol(req);
  if (req.method !== 'POST') throw new BerthError('not_found', 'No such host call.', { path });
  const providerCall = /^\/v1\/provider\/(allocate|inspect|deallocate)$/.exec(path)?.[1];
  if (providerCall === 'allocate') {
    const call = parsed(allocateCallSchema, await body(req));
    return json(res, await dispatch.allocate(call.target, call.profile));
  }
  if (providerCall === 'inspect') return json(res, await dispatch.inspect(parsed(refCallSchema, await body(req)).target));
  if (providerCall === 'deallocate') return json(res, { result: await dispatch.deallocate(parsed(refCallSchema, await body(req)).target) });
  const filesOp = /^\/v1\/files\/(capture|apply)$/.exec(path)?.[1];
  if (filesOp) return files.serve(filesOp as FilesOp, req, res);
  const op = /^\/v1\/exec\/([A-Za-z]+)$/.exec(path)?.[1];
  if (!op || !Object.hasOwn(execCallSchemas, op)) throw new BerthError('not_found', 'No such host call.', { path });
  const call = parsed(execCallSchemas[op as ExecOp], await body(req));
  if (op === 'follow') return dispatch.follow(call as never, req, res);
  if (op === 'stream') return dispatch.stream(call as never, res);
  if (op === 'read') {
    const chunk = await dispatch.read(call as never);
    res.writeHead(200, {
      'content-type': 'application/octet-stream',
      'content-length': chunk.data.length,
      [READ_NEXT_HEADER]: String(chunk.next),
      [READ_CLOSED_HEADER]: chunk.closed ? '1' : '0',
    });
    return void res.end(chunk.data);
  }
  return json(res, await (dispatch[op as Exclude<ExecOp, 'read' | 'follow' | 'stream'>] as (c: unknown) => Promise<unknown>).call(dispatch, call));
}
