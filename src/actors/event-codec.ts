/**
 * Events in and out of an actor's stream (DESIGN §4 rule 4): zod-validated on write (a refusal is
 * `invalid_request`, before anything is written) and on read (after upcasting; a failure is a CorruptEvent naming
 * the stream and revision, never skipped). A stored event is {type, data: the fields minus `type`, metadata}.
 */
import { z } from 'zod';
import { BerthError } from '../../schemas/errors.ts';
import { CorruptEvent, type RecordedEvent } from '../store/event-store.ts';
import { RUNTIME_RECOVERED, type ActorType, type DomainEvent } from './actor-type.ts';

/** Every actor type accepts `runtime.recovered` (rule 7); the runtime adds this schema where a type does not. */
export const runtimeRecoveredSchema = z.strictObject({
  runtimeId: z.string().min(1),
  epoch: z.number().int().nonnegative(),
  /** Milliseconds since the Unix epoch, as every event's `at`. */
  at: z.number().int().nonnegative(),
});

export function eventSchema(actorType: ActorType, type: string): z.ZodType | undefined {
  if (Object.hasOwn(actorType.events, type)) return actorType.events[type];
  return type === RUNTIME_RECOVERED ? runtimeRecoveredSchema : undefined;
}

export const schemaVersionOf = (actorType: ActorType, type: string): number => actorType.schemaVersions?.[type] ?? 1;

/** Splits a domain event into its type and data (every field but `type`). */
export function splitEvent(event: DomainEvent): { type: string; data: Record<string, unknown> } {
  const { type, ...data } = event;
  return { type, data };
}

/** Validates an event sent to an actor; returns it with the schema's parsed data. Throws `invalid_request`. */
export function validateIncoming(actorType: ActorType, event: DomainEvent): DomainEvent {
  if (event === null || typeof event !== 'object' || typeof event.type !== 'string') {
    throw new BerthError('invalid_request', `an event sent to a ${actorType.type} has no type`, {
      actorType: actorType.type,
    });
  }
  const schema = eventSchema(actorType, event.type);
  if (!schema) {
    throw new BerthError('invalid_request', `a ${actorType.type} does not accept ${event.type} events`, {
      actorType: actorType.type,
      eventType: event.type,
    });
  }
  const { type, data } = splitEvent(event);
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new BerthError('invalid_request', `invalid ${type} event: ${z.prettifyError(parsed.error)}`, {
      actorType: actorType.type,
      eventType: type,
      issues: parsed.error.issues,
    });
  }
  // `data` is this function's own copy, so the schema's output (itself or a new object) may take the type in place.
  return asDomainEvent(type, parsed.data, true);
}

/**
 * What decoding a stored event needs. A RecordedEvent is one, so reads fold without a copy per event; recovery's
 * scan keeps only this of each event it buffers.
 */
export interface StoredEvent {
  stream: string;
  revision: bigint;
  type: string;
  data: unknown;
  /**
   * Of the metadata only `schemaVersion` (default 1), `compacted` (true on the summary a compaction left as the
   * stream's first event: the revisions before it are gone on purpose), `runtimeId` and `epoch` (the writer:
   * ownership.ts).
   */
  metadata: { schemaVersion?: unknown; compacted?: unknown; runtimeId?: unknown; epoch?: unknown };
}

export const storedEventOf = (r: RecordedEvent): StoredEvent => ({
  stream: r.stream,
  revision: r.revision,
  type: r.type,
  data: r.data,
  metadata:
    r.metadata.compacted === true
      ? { schemaVersion: r.metadata.schemaVersion, compacted: true, runtimeId: r.metadata.runtimeId, epoch: r.metadata.epoch }
      : { schemaVersion: r.metadata.schemaVersion, runtimeId: r.metadata.runtimeId, epoch: r.metadata.epoch },
});

/** Turns a stored event back into the domain event the machine folds: upcast, then validate. */
export const decodeRecorded = (actorType: ActorType, recorded: RecordedEvent): DomainEvent => decodeStored(actorType, recorded);

export function decodeStored(actorType: ActorType, stored: StoredEvent): DomainEvent {
  const schema = eventSchema(actorType, stored.type);
  if (!schema) {
    throw new CorruptEvent(stored.stream, stored.revision, `${actorType.type} has no ${stored.type} event`);
  }
  const current = schemaVersionOf(actorType, stored.type);
  const version = Number(stored.metadata.schemaVersion ?? 1);
  let data = stored.data;
  if (version !== current) {
    if (!(version < current) || !actorType.upcast) {
      throw new CorruptEvent(
        stored.stream,
        stored.revision,
        `${stored.type} has schemaVersion ${version}; this code reads version ${current}`,
      );
    }
    try {
      data = actorType.upcast(stored.type, data, version);
    } catch (e) {
      throw new CorruptEvent(stored.stream, stored.revision, `upcast failed: ${(e as Error).message}`);
    }
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new CorruptEvent(stored.stream, stored.revision, z.prettifyError(parsed.error));
  }
  // An object the schema built is ours to complete; one it passed through is the stored event's, and is copied.
  return asDomainEvent(stored.type, parsed.data, parsed.data !== stored.data && parsed.data !== data);
}

/** The schema's output with its `type` (the object itself when `own`: a copy per event was a twentieth of a fold). */
function asDomainEvent(type: string, data: unknown, own: boolean): DomainEvent {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new BerthError('internal', `the schema of ${type} must describe an object`, { eventType: type });
  }
  if (!own) return { ...(data as Record<string, unknown>), type };
  (data as Record<string, unknown>).type = type;
  return data as DomainEvent;
}
