/**
 * Binds a gateway to a transport: TCP (default host 127.0.0.1) or a Unix socket (mode 0600: only the owner may
 * connect), plain or TLS. Several listeners may serve one gateway. Closing a listener drops its connections,
 * WebSockets included; clients reconnect from their cursors.
 */
import { chmod, readFile, rm, stat } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net, { type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Gateway } from './app.ts';

export type ListenAddress = { host?: string; port?: number } | { socketPath: string };

export interface TlsFiles {
  certPath: string;
  keyPath: string;
}

export interface Listener {
  /** `http(s)://host:port` or `http(s)+unix://<encoded socket path>`. */
  url: string;
  server: http.Server;
  close(): Promise<void>;
}

/** A socket file left by a dead process is removed; one that still answers is in use and refused. */
async function clearStaleSocket(path: string): Promise<void> {
  const info = await stat(path).catch(() => undefined);
  if (!info) return;
  if (!info.isSocket()) throw new Error(`${path} exists and is not a socket`);
  const inUse = await new Promise<boolean>((resolve) => {
    const probe = net.connect(path);
    probe.once('connect', () => (probe.destroy(), resolve(true)));
    probe.once('error', () => resolve(false));
  });
  if (inUse) throw new Error(`${path} is in use by another server`);
  await rm(path);
}

export async function listen(gateway: Gateway, address: ListenAddress, tls?: TlsFiles): Promise<Listener> {
  await gateway.app.ready();
  const server: http.Server = tls
    ? https.createServer({ cert: await readFile(tls.certPath), key: await readFile(tls.keyPath) })
    : http.createServer();
  server.on('request', gateway.app.routing);
  server.on('upgrade', gateway.upgrade);
  server.on('clientError', (_error, socket) => {
    if (!socket.writable) return socket.destroy();
    const body = JSON.stringify({ error: { code: 'invalid_request', message: 'The HTTP request is malformed.', detail: {} } });
    socket.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
  });
  // Upgraded sockets leave the server's own bookkeeping: track every connection so close() can drop them all.
  const sockets = new Set<Socket>();
  server.on(tls ? 'secureConnection' : 'connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  const scheme = tls ? 'https' : 'http';
  let url: string;
  if ('socketPath' in address) {
    await clearStaleSocket(address.socketPath);
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(address.socketPath, resolve));
    await chmod(address.socketPath, 0o600);
    url = `${scheme}+unix://${encodeURIComponent(address.socketPath)}`;
  } else {
    const host = address.host ?? '127.0.0.1';
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(address.port ?? 0, host, resolve));
    const { port } = server.address() as AddressInfo;
    url = `${scheme}://${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  return {
    url,
    server,
    close: async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}
