/**
 * What a machine's `reject(snapshot, event)` returns for an event it does not accept: the same shape as the actor
 * contract's `Rejection` (src/actors/actor-type.ts), restated here because machines import only xstate and schemas.
 */
import type { ErrorCode } from '../../schemas/errors.ts';

export interface Rejection {
  code: ErrorCode;
  message: string;
  detail?: Record<string, unknown>;
}

/** An event as the runtime hands it over, before the machine narrows it: `{type, ...data}`. */
export interface IncomingEvent {
  type: string;
  [field: string]: unknown;
}
