/**
 * The gateway's one error handler: every failure leaves as `{"error":{"code","message","detail"}}` (DESIGN §8).
 * BerthError keeps its code and status; fastify's own 4xx become `body_too_large` (body size), `not_found` (unknown
 * route) or `invalid_request` (bad JSON, content type, …); anything else is a logged 500 `internal` with a generic
 * message, never a stack.
 */
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BerthError, isBerthError, type ErrorBody } from '../../schemas/errors.ts';

/** Fastify error codes with a message of ours: theirs may quote the request (a JSON syntax error echoes input). */
const fastifyMessages: Record<string, string> = {
  FST_ERR_CTP_BODY_TOO_LARGE: 'The request body is larger than the gateway accepts.',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'The request content type is not supported; send application/json.',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'The request body is empty although its content type is application/json.',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'The request content length does not match its body.',
  FST_ERR_CTP_INVALID_JSON_BODY: 'The request body is not valid JSON.',
  FST_ERR_BAD_URL: 'The request URL is malformed.',
};

/** Maps any thrown value to the BerthError that goes on the wire. */
export function toBerthError(error: unknown, bodyLimit?: number): BerthError {
  if (isBerthError(error)) return error;
  const fe = error as Partial<FastifyError> | undefined;
  const status = typeof fe?.statusCode === 'number' ? fe.statusCode : 500;
  if (status === 404) return new BerthError('not_found', 'The resource does not exist.');
  if (status >= 400 && status < 500) {
    const code = typeof fe?.code === 'string' ? fe.code : undefined;
    if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return new BerthError('body_too_large', fastifyMessages[code]!, bodyLimit === undefined ? {} : { max_bytes: bodyLimit });
    }
    const isJsonSyntax = error instanceof SyntaxError;
    const message =
      (code && fastifyMessages[code]) ?? (isJsonSyntax ? fastifyMessages.FST_ERR_CTP_INVALID_JSON_BODY : 'The request is malformed.');
    return new BerthError('invalid_request', message, { reason: code ?? (isJsonSyntax ? 'invalid_json' : 'malformed') });
  }
  return new BerthError('internal', 'An unexpected error occurred; it has been logged.');
}

export function sendError(reply: FastifyReply, error: BerthError): FastifyReply {
  const body: ErrorBody = error.toBody();
  if (error.code === 'unauthorized') reply.header('www-authenticate', 'Bearer');
  return reply.code(error.status).type('application/json; charset=utf-8').send(body);
}

function logIfServerFault(request: FastifyRequest, original: unknown, mapped: BerthError): void {
  if (mapped.status >= 500) request.log.error({ err: original, code: mapped.code }, 'request failed');
}

/** Installs the error and not-found handlers on the root instance (so every resource plugin inherits them). */
export function installErrorHandling(app: FastifyInstance, bodyLimit: number): void {
  app.setErrorHandler((error, request, reply) => {
    const mapped = toBerthError(error, bodyLimit);
    logIfServerFault(request, error, mapped);
    return sendError(reply, mapped);
  });
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0]!.slice(0, 200);
    return sendError(reply, new BerthError('not_found', `No route ${request.method} ${path}.`, { method: request.method, path }));
  });
}
