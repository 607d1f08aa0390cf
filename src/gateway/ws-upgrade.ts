/**
 * WebSocket upgrades go through fastify's normal routing, so auth, validation and the error shape apply to them like
 * to any request (the approach of @fastify/websocket, without the dependency). The server's `upgrade` event hands
 * the request to fastify with a response bound to the raw socket; a route marked `websocket` then completes the
 * handshake with `ws`, any other answer is written as plain HTTP and the socket closed.
 */
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocket, WebSocketServer } from 'ws';
import { BerthError } from '../../schemas/errors.ts';

interface PendingUpgrade {
  socket: Duplex;
  head: Buffer;
}

const pending = new WeakMap<IncomingMessage, PendingUpgrade>();

export const isUpgradeRequest = (request: FastifyRequest): boolean => pending.has(request.raw);

/** The `upgrade` listener for a node http(s) server serving `app`. */
export function upgradeListener(app: FastifyInstance): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  return (req, socket, head) => {
    socket.on('error', () => socket.destroy());
    pending.set(req, { socket, head });
    const res = new ServerResponse(req);
    res.assignSocket(socket as never);
    // An HTTP answer (an error) ends the exchange: the socket is not a keep-alive connection of the server.
    res.on('finish', () => {
      if (pending.has(req)) socket.destroy();
    });
    app.routing(req, res);
  };
}

/** Completes the handshake for a route marked `websocket`; resolves with the open socket. */
export function acceptUpgrade(wss: WebSocketServer, request: FastifyRequest, reply: FastifyReply): Promise<WebSocket> {
  const upgrade = pending.get(request.raw);
  if (!upgrade) throw new Error('acceptUpgrade called for a request that is not an upgrade');
  pending.delete(request.raw);
  reply.hijack();
  return new Promise((resolve) => wss.handleUpgrade(request.raw, upgrade.socket, upgrade.head, resolve));
}

/** An upgrade request to an existing route that does not speak WebSocket is refused before anything runs. */
export function refuseStrayUpgrades(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    const config = request.routeOptions.config as { websocket?: boolean };
    if (isUpgradeRequest(request) && !request.is404 && !config.websocket) {
      throw new BerthError('invalid_request', 'This path does not accept WebSocket upgrades.', { reason: 'not_websocket' });
    }
  });
}
