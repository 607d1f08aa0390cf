/**
 * How `berth events` and `berth replay` print a recorded event: one JSON object per line with the fixed fields of
 * DESIGN §8 (revision and position as JSON numbers), or one readable line.
 */
import type { RecordedEvent } from '../store/event-store.ts';

export function eventJson(e: RecordedEvent, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    id: e.id,
    stream: e.stream,
    revision: Number(e.revision),
    position: Number(e.position),
    type: e.type,
    data: e.data,
    metadata: e.metadata,
    createdAt: e.createdAt,
    ...extra,
  });
}

export function eventHuman(e: RecordedEvent): string {
  return `#${e.position} ${e.createdAt} ${e.stream}@${e.revision} ${e.type} ${JSON.stringify(e.data)}`;
}
