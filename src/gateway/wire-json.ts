/**
 * JSON on the wire: bigints (event revisions and global positions) are written as decimal strings, everywhere — in
 * response bodies, SSE data and WebSocket frames — because JSON numbers lose precision past 2^53.
 */
import type { RecordedEventJson } from '../../schemas/api.ts';
import type { RecordedEvent } from '../store/event-store.ts';

const bigintAsString = (_key: string, value: unknown): unknown => (typeof value === 'bigint' ? value.toString() : value);

/**
 * Plain JSON.stringify first: most answers hold no bigint, and a replacer called for every value costs about half
 * again on large ones (a 1,000-environment catalog). A bigint makes it throw a TypeError; then the replacer runs.
 */
export function stringifyWire(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (e) {
    if (!(e instanceof TypeError)) throw e;
    return JSON.stringify(value, bigintAsString);
  }
}

export function recordedEventToWire(event: RecordedEvent): RecordedEventJson {
  return {
    id: event.id,
    stream: event.stream,
    revision: event.revision.toString(),
    position: event.position.toString(),
    type: event.type,
    data: event.data,
    metadata: event.metadata,
    createdAt: event.createdAt,
  };
}
