/**
 * The SQLite store's events-table row and its decoding into a RecordedEvent (a StreamEvent for `readStreams`); shared
 * by the store and its subscriptions. A row that does not decode is reported with its stream and revision, never
 * skipped.
 */
import { CorruptEvent, type RecordedEvent, type StreamEvent } from './event-store.ts';

/** The columns every read of events selects, in the order of an EventRow. */
export const EVENT_COLUMNS = 'position, stream, revision, id, type, data, metadata, created_at';

/**
 * A row of the events table as a raw-mode statement returns it (an array: better-sqlite3 builds no keyed object per
 * row, which was a fifth of a full scan), integers read as bigint.
 */
export type EventRow = [
  position: bigint,
  stream: string,
  revision: bigint,
  id: string,
  type: string,
  data: string,
  metadata: string,
  createdAt: string,
];

/** Turns a stored row into a recorded event; a row that does not decode is reported, never skipped. */
export function decodeRow([position, stream, revision, id, type, rawData, rawMetadata, createdAt]: EventRow): RecordedEvent {
  const { data, metadata } = parsePayload(stream, revision, rawData, rawMetadata, { position, type });
  return { id, stream, revision, position, type, data, metadata, createdAt };
}

/** The columns of a `readStreams` row, in the order of a StreamRow: only what a fold needs. */
export const STREAM_EVENT_COLUMNS = 'stream, revision, type, data, metadata';

export type StreamRow = [stream: string, revision: bigint, type: string, data: string, metadata: string];

export function decodeStreamRow([stream, revision, type, rawData, rawMetadata]: StreamRow): StreamEvent {
  const { data, metadata } = parsePayload(stream, revision, rawData, rawMetadata);
  return { stream, revision, type, data, metadata };
}

function parsePayload(
  stream: string,
  revision: bigint,
  rawData: string,
  rawMetadata: string,
  at?: { position: bigint; type: string },
): { data: unknown; metadata: Record<string, unknown> } {
  let data: unknown;
  let metadata: unknown;
  try {
    data = JSON.parse(rawData);
    metadata = JSON.parse(rawMetadata);
  } catch (e) {
    throw new CorruptEvent(stream, revision, (e as Error).message, at);
  }
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw new CorruptEvent(stream, revision, 'metadata is not an object', at);
  }
  return { data, metadata: metadata as Record<string, unknown> };
}
