/**
 * The gateway's logger: a pino child that can never print a credential. Authorization headers are redacted by path,
 * and URLs are logged through url-redaction.ts (no `token` query value in any spelling, no known token anywhere).
 */
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { urlRedactor, type IsCredential } from './url-redaction.ts';

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

interface RawRequestLike {
  method?: string;
  url?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

export interface GatewayLogger {
  logger: Logger;
  /** The URL as it may be logged. */
  redactUrl: (url: string) => string;
}

/** `isCredential` says whether a string is a token the server knows (so it is hidden wherever it appears). */
export function gatewayLogger(parent: Logger | undefined, isCredential: IsCredential): GatewayLogger {
  const base = parent ?? pino({ level: 'silent' });
  const redactUrl = urlRedactor(isCredential);
  const logger = base.child(
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
  return { logger, redactUrl };
}

/** One line per answered request (fastify's own request logging is off: it would print raw URLs). */
export function installRequestLog(app: FastifyInstance, redactUrl: (url: string) => string): void {
  app.addHook('onResponse', async (request, reply) => {
    // Redacting a URL hashes every long word of it against the known tokens: not for a line nobody will print.
    if (!(request.log as Logger).isLevelEnabled('info')) return; // a child of gatewayLogger's pino logger
    request.log.info(
      { method: request.method, url: redactUrl(request.url), statusCode: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      'request',
    );
  });
}
