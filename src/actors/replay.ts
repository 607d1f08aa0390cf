/**
 * Replaying a stream (DESIGN §4 rule 5), for `berth replay` and the gateway's `/v1/streams/{stream}`: fold the
 * recorded events through the pure transition, discarding actions, and show the state before and after each.
 * Deterministic: replaying the same events twice gives equal results.
 */
import type { StateValue } from 'xstate';
import type { RecordedEvent } from '../store/event-store.ts';
import type { ActorType } from './actor-type.ts';
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
 * actor restored part-way, from a snapshot). The actor id (for the machine's input) defaults to the stream name minus
 * `<type>-`.
 */
export function replayStream(
  actorType: ActorType,
  events: RecordedEvent[],
  opts: { actorId?: string; from?: LoadedActor } = {},
): ReplayedEvent[] {
  if (events.length === 0) return [];
  let actor = opts.from ?? freshActor(actorType, opts.actorId ?? events[0].stream.slice(actorType.type.length + 1));
  return events.map((event) => {
    const before = actor.snapshot;
    actor = foldStored(actorType, actor, [event]);
    return {
      event,
      stateBefore: before.value,
      stateAfter: actor.snapshot.value,
      contextDiff: diffContext(before.context, actor.snapshot.context),
    };
  });
}

function diffContext(before: unknown, after: unknown): ReplayedEvent['contextDiff'] {
  const b = (before ?? {}) as Record<string, unknown>;
  const a = (after ?? {}) as Record<string, unknown>;
  const diff: ReplayedEvent['contextDiff'] = {};
  for (const key of new Set([...Object.keys(b), ...Object.keys(a)])) {
    if (JSON.stringify(b[key]) !== JSON.stringify(a[key])) diff[key] = { before: b[key], after: a[key] };
  }
  return diff;
}
