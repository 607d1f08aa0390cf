/**
 * How `berth replay` prints a stream, alike whether this process folded it or a server answered: a header, then each
 * event (a JSON line with its states and context diff, or a readable line with the state change and one line per
 * context key the event changed).
 */
import type { RecordedEvent } from '../store/event-store.ts';
import { eventHuman, eventJson } from './event-lines.ts';

export interface ReplayLine {
  event: RecordedEvent;
  /** Null when no machine folded the stream (its category names no actor type). */
  stateBefore: unknown;
  stateAfter: unknown;
  contextDiff: Record<string, { before?: unknown; after?: unknown }> | null;
}

const label = (v: unknown) => (v === null || v === undefined ? '?' : typeof v === 'string' ? v : JSON.stringify(v));

export const replayHeader = (stream: string, count: number) => `${stream}: ${count} events`;

export const replayJson = (s: ReplayLine) => eventJson(s.event, { stateBefore: s.stateBefore, stateAfter: s.stateAfter, contextDiff: s.contextDiff });

export function replayHuman(s: ReplayLine): string {
  const lines = [eventHuman(s.event)];
  if (s.stateBefore !== null) lines.push(`    state: ${label(s.stateBefore)} -> ${label(s.stateAfter)}`);
  for (const [key, { before, after }] of Object.entries(s.contextDiff ?? {})) {
    lines.push(`    ${key}: ${JSON.stringify(before) ?? 'undefined'} -> ${JSON.stringify(after) ?? 'undefined'}`);
  }
  return lines.join('\n');
}
