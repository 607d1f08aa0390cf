/**
 * Replaying a stream (DESIGN §4 rule 5), for `berth replay` and the gateway's `/v1/streams/{stream}`: fold the
 * recorded events through the pure transition, discarding actions, and show the state before and after each.
 * Deterministic: replaying the same events twice gives equal results.
 */
import type { StateValue } from 'xstate';
import type { RecordedEvent } from '../store/event-store.ts';
import type { ActorType } from './actor-type.ts';
import { jsonSizeAtMost } from './json-size.ts';
import { foldStored, freshActor, type LoadedActor } from './rehydrate.ts';

export interface ReplayedEvent {
  event: RecordedEvent;
  stateBefore: StateValue;
  stateAfter: StateValue;
  /** Context keys whose value changed, with both values. */
  contextDiff: Record<string, { before: unknown; after: unknown }>;
}

/**
 * `events` must be the stream from revision 0 on (a prefix of it is fine), or its events right after `from` (an
 * actor restored part-way, from a snapshot, or the end of an earlier `replaySteps`). The actor id (for the machine's
 * input) defaults to the stream name minus `<type>-`. `maxValueChars`: a changed context value whose JSON is longer is
 * shown as `omittedValue` says (default: every value whole).
 */
export function replayStream(
  actorType: ActorType,
  events: RecordedEvent[],
  opts: { actorId?: string; from?: LoadedActor; maxValueChars?: number } = {},
): ReplayedEvent[] {
  return replaySteps(actorType, events, opts).steps;
}

/** `replayStream`'s steps and the actor after the last of them (`from` when there are none), to go on from. */
export function replaySteps(
  actorType: ActorType,
  events: RecordedEvent[],
  opts: { actorId?: string; from?: LoadedActor; maxValueChars?: number } = {},
): { steps: ReplayedEvent[]; after: LoadedActor | undefined } {
  if (events.length === 0) return { steps: [], after: opts.from };
  let actor = opts.from ?? freshActor(actorType, opts.actorId ?? events[0].stream.slice(actorType.type.length + 1));
  const maxValueChars = opts.maxValueChars ?? Infinity;
  const steps = events.map((event) => {
    const before = actor.snapshot;
    actor = foldStored(actorType, actor, [event]);
    return {
      event,
      stateBefore: before.value,
      stateAfter: actor.snapshot.value,
      contextDiff: diffContext(before.context, actor.snapshot.context, maxValueChars),
    };
  });
  return { steps, after: actor };
}

/**
 * What a diff shows for a value past `maxValueChars`: its kind and size. A context that grows with its stream (a
 * turn's executions) would otherwise be written whole, twice, at every step: a page of a turn of 1,400 commands was
 * 200 MB and its full replay no longer fit in a string.
 */
export const omittedValue = (value: unknown, maxChars: number): { $omitted: { type: string; items?: number; maxChars: number } } => ({
  $omitted: Array.isArray(value)
    ? { type: 'array', items: value.length, maxChars }
    : typeof value === 'string'
      ? { type: 'string', items: value.length, maxChars }
      : { type: typeof value, maxChars },
});

function diffContext(before: unknown, after: unknown, maxValueChars: number): ReplayedEvent['contextDiff'] {
  const b = (before ?? {}) as Record<string, unknown>;
  const a = (after ?? {}) as Record<string, unknown>;
  const longer = (value: unknown) => maxValueChars !== Infinity && jsonSizeAtMost(value, maxValueChars + 1) > maxValueChars;
  const shown = (value: unknown) => (longer(value) ? omittedValue(value, maxValueChars) : value);
  const diff: ReplayedEvent['contextDiff'] = {};
  for (const key of new Set([...Object.keys(b), ...Object.keys(a)])) {
    if (!sameJson(b[key], a[key])) diff[key] = { before: shown(b[key]), after: shown(a[key]) };
  }
  return diff;
}

/**
 * Whether two values write the same JSON, read only as far as their first difference (an unchanged key of a large
 * context costs nothing to compare, and a grown array is told apart by its length).
 */
function sameJson(x: unknown, y: unknown): boolean {
  if (x === y) return true;
  if (x === null || y === null || typeof x !== 'object' || typeof y !== 'object') return JSON.stringify(x) === JSON.stringify(y);
  if (Array.isArray(x) !== Array.isArray(y)) return false;
  if (Array.isArray(x)) {
    const other = y as unknown[];
    return x.length === other.length && x.every((item, i) => sameJson(item, other[i]));
  }
  if (typeof (x as { toJSON?: unknown }).toJSON === 'function' || typeof (y as { toJSON?: unknown }).toJSON === 'function') {
    return JSON.stringify(x) === JSON.stringify(y);
  }
  const xo = x as Record<string, unknown>;
  const yo = y as Record<string, unknown>;
  const keys = Object.keys(xo).filter((k) => xo[k] !== undefined);
  if (keys.length !== Object.keys(yo).filter((k) => yo[k] !== undefined).length) return false;
  return keys.every((k) => sameJson(xo[k], yo[k]));
}
