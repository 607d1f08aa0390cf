/**
 * An answer given before the request body was read (a body over the limit, a refused upload or archive, a failed
 * auth) waits until the rest of the body is read and thrown away, so a client that writes its whole body and only
 * then reads gets the answer: closing with unread bytes makes the kernel reset the connection under the client's
 * writes (EPIPE, ECONNRESET) and its read buffer. Bounded: past `discardBytes` or `discardMs` the answer goes out
 * with `Connection: close`, and the gateway ends its side and waits `closeLingerMs` before it closes (a lingering
 * close), so even a client that writes without end gets the answer.
 */
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { GatewayLimits } from './limits.ts';

/**
 * Reads and drops what is left of a request body. Resolves true once the body has ended, false when a bound was
 * passed or the client went away first. Reads through `read()`, which works whatever mode a refused reader left the
 * stream in (flowing with no data listener, or paused under an abandoned async iterator).
 */
export function discardRest(request: IncomingMessage, bounds: Pick<GatewayLimits, 'discardBytes' | 'discardMs'>): Promise<boolean> {
  if (request.complete || request.destroyed) return Promise.resolve(request.complete);
  return new Promise((resolve) => {
    let dropped = 0;
    const drop = () => {
      for (let chunk: Buffer | null; (chunk = request.read()) !== null; ) {
        dropped += chunk.length;
        if (dropped > bounds.discardBytes) return finish(false);
      }
    };
    const ended = () => finish(true);
    const gone = () => finish(request.complete);
    const timer = setTimeout(() => finish(false), bounds.discardMs);
    function finish(whole: boolean): void {
      clearTimeout(timer);
      request.off('readable', drop).off('end', ended).off('close', gone).off('error', gone);
      resolve(whole);
    }
    request.on('readable', drop).once('end', ended).once('close', gone).once('error', gone);
    drop();
  });
}

/**
 * Node closes a connection once its last answer is sent (`destroySoon`: end, then destroy), with whatever the client
 * still sends unread, so the kernel resets it, perhaps before the client has read the answer. Instead: end this side
 * and stop reading (the client's writes wait on a full window, they do not fail, and cost the server nothing), then
 * close after `ms`, by when the client has read its answer.
 */
function lingerOnClose(request: IncomingMessage, ms: number): void {
  const socket = request.socket;
  socket.destroySoon = () => {
    socket.pause();
    socket.end();
    const timer = setTimeout(() => socket.destroy(), ms).unref();
    socket.once('close', () => clearTimeout(timer));
  };
}

/** Installs the wait on the root instance, so every route, error and not-found answer goes through it. */
export function installUnreadBodyDiscard(app: FastifyInstance, bounds: Pick<GatewayLimits, 'discardBytes' | 'discardMs' | 'closeLingerMs'>): void {
  // Callback style: the usual answer, to a request read whole, goes on in the same tick.
  app.addHook('onSend', (request, reply, payload, done) => {
    if (request.raw.complete) return done(null, payload);
    void discardRest(request.raw, bounds).then((whole) => {
      // Read to its end, the connection can take the next request as node would have it (fastify asks to close after
      // a refused body only because it leaves the rest unread); cut off, it must close: what follows is body bytes.
      const keep = whole && reply.raw.shouldKeepAlive;
      reply.header('connection', keep ? 'keep-alive' : 'close');
      if (!keep) lingerOnClose(request.raw, bounds.closeLingerMs);
      done(null, payload);
    });
  });
}
