/**
 * The checks every call to a host passes before its target is fenced, whether it comes as a request or as a
 * WebSocket upgrade: the protocol version its header names, then the call's schema.
 */
import type http from 'node:http';
import type { z } from 'zod';
import { BerthError } from '../../schemas/errors.ts';
import { HOST_PROTOCOL_VERSION, PROTOCOL_HEADER } from '../../schemas/host-protocol.ts';

export function checkProtocol(req: http.IncomingMessage): void {
  const version = req.headers[PROTOCOL_HEADER];
  if (version !== String(HOST_PROTOCOL_VERSION)) {
    throw new BerthError('invalid_request', `The host speaks protocol ${HOST_PROTOCOL_VERSION}, the call ${version ?? 'none'}.`, {
      reason: 'protocol_mismatch',
      host: HOST_PROTOCOL_VERSION,
      call: version ?? null,
    });
  }
}

export function parsed<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new BerthError('invalid_request', 'The call does not match the host protocol.', { issues: result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`) });
  }
  return result.data;
}
