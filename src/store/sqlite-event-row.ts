/**
 * The SQLite store's events-table row and its decoding into a RecordedEvent; shared by the store and its
 * subscriptions. A row that does not decode is reported with its stream and revision, never skipped.
 */
import { CorruptEvent, type RecordedEvent } from './event-store.ts';

/** A row of the events table, integers read as bigint. */
export interface EventRow {
  position: bigint;
  stream: string;
  revision: bigint;
  id: string;
  type: string;
  data: string;
  metadata: string;
  created_at: string;
}

/** Turns a stored row into a recorded event; a row that does not decode is reported, never skipped. */
export function decodeRow(row: EventRow): RecordedEvent {
  let data: unknown;
  let metadata: unknown;
  try {
    data = JSON.parse(row.data);
    metadata = JSON.parse(row.metadata);
  } catch (e) {
    throw new CorruptEvent(row.stream, row.revision, (e as Error).message);
  }
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw new CorruptEvent(row.stream, row.revision, 'metadata is not an object');
  }
  return {
    id: row.id,
    stream: row.stream,
    revision: row.revision,
    position: row.position,
    type: row.type,
    data,
    metadata: metadata as Record<string, unknown>,
    createdAt: row.created_at,
  };
}
