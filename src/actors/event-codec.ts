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
  return asDomainEvent(type, parsed.data);
}

/** What decoding a stored event needs (recovery keeps only this of each event it buffers). */
export interface StoredEvent {
  stream: string;
  revision: bigint;
  type: string;
  data: unknown;
  schemaVersion: number;
  /** The summary a compaction left as the stream's first event: the revisions before it are gone on purpose. */
  compacted?: boolean;
}

export const storedEventOf = (r: RecordedEvent): StoredEvent => ({
  stream: r.stream,
  revision: r.revision,
  type: r.type,
  data: r.data,
  schemaVersion: Number(r.metadata.schemaVersion ?? 1),
  ...(r.metadata.compacted === true ? { compacted: true } : {}),
});

/** Turns a stored event back into the domain event the machine folds: upcast, then validate. */
export const decodeRecorded = (actorType: ActorType, recorded: RecordedEvent): DomainEvent =>
  decodeStored(actorType, storedEventOf(recorded));

export function decodeStored(actorType: ActorType, stored: StoredEvent): DomainEvent {
  const schema = eventSchema(actorType, stored.type);
  if (!schema) {
    throw new CorruptEvent(stored.stream, stored.revision, `${actorType.type} has no ${stored.type} event`);
  }
  const current = schemaVersionOf(actorType, stored.type);
  let data = stored.data;
  if (stored.schemaVersion !== current) {
    if (!(stored.schemaVersion < current) || !actorType.upcast) {
      throw new CorruptEvent(
        stored.stream,
        stored.revision,
        `${stored.type} has schemaVersion ${stored.schemaVersion}; this code reads version ${current}`,
      );
    }
    try {
      data = actorType.upcast(stored.type, data, stored.schemaVersion);
    } catch (e) {
      throw new CorruptEvent(stored.stream, stored.revision, `upcast failed: ${(e as Error).message}`);
    }
  }
  const parsed = schema.safeParse(data);
  if (!parsed.success) {
    throw new CorruptEvent(stored.stream, stored.revision, z.prettifyError(parsed.error));
  }
  return asDomainEvent(stored.type, parsed.data);
}

function asDomainEvent(type: string, data: unknown): DomainEvent {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new BerthError('internal', `the schema of ${type} must describe an object`, { eventType: type });
  }
  return { ...(data as Record<string, unknown>), type };
}
