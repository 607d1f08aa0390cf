/**
 * The gateway's logger: a pino child that can never print a credential. Authorization headers are redacted by path,
 * and URLs are logged with their `token` query parameter (browser WebSocket/SSE auth) replaced.
 */
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';

const REDACTED = '[redacted]';

export const redactedPaths = [
  'authorization',
  'headers.authorization',
  'req.headers.authorization',
  'request.headers.authorization',
  'token',
  '*.token',
  'query.token',
  'req.query.token',
];

export const redactUrl = (url: string): string => url.replace(/([?&]token=)[^&#]*/gi, `$1${REDACTED}`);

interface RawRequestLike {
  method?: string;
  url?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

export function gatewayLogger(parent: Logger | undefined): Logger {
  const base = parent ?? pino({ level: 'silent' });
  return base.child(
    { component: 'gateway' },
    {
      redact: { paths: redactedPaths, censor: REDACTED },
      serializers: {
        req: (req: RawRequestLike) => ({
          method: req.method,
          url: req.url === undefined ? undefined : redactUrl(req.url),
          remoteAddress: req.ip,
          remotePort: req.socket?.remotePort,
        }),
      },
    },
  );
}

/** One line per answered request (fastify's own request logging is off: it would print raw URLs). */
export function installRequestLog(app: FastifyInstance): void {
  app.addHook('onResponse', async (request, reply) => {
    request.log.info(
      { method: request.method, url: redactUrl(request.url), statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'request',
    );
  });
}
