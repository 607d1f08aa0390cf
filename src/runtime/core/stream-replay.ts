/**
 * Replays one stored stream (for `berth replay` and the gateway's `/v1/streams/{stream}`): reads it up to a revision
 * and folds it through the actor type its category names, giving the machine state before and after each event.
 * A stream whose category has no registered actor type is returned as events without states (`actorType` null).
 */
import type { StateValue } from 'xstate';
import type { ActorType } from '../../actors/actor-type.ts';
import { replayStream } from '../../actors/replay.ts';
import type { EventStore, RecordedEvent } from '../../store/event-store.ts';
import { actorTypeOfStream, actorTypes } from '../registry.ts';

export interface ReplayedStep {
  event: RecordedEvent;
  stateBefore: StateValue | null;
  stateAfter: StateValue | null;
  contextDiff: Record<string, { before: unknown; after: unknown }> | null;
}

/**
 * The longest context value (its JSON) a replay step shows whole; a longer one is summarised (`omittedValue`), so a
 * step costs a bounded size however long its actor's context grew (a replay was quadratic in a turn's commands).
 */
export const DIFF_VALUE_MAX_CHARS = 4096;

export interface StreamReplay {
  stream: string;
  /** The actor type folded, or null when the category is unknown. */
  actorType: string | null;
  steps: ReplayedStep[];
}

/** `at`: stop at this revision (inclusive). Throws `not_found` for an absent stream. */
export async function replayStoredStream(
  store: EventStore,
  stream: string,
  opts: { at?: bigint; types?: ActorType[] } = {},
): Promise<StreamReplay> {
  const maxCount = opts.at === undefined ? undefined : Number(opts.at) + 1;
  const read = maxCount === 0 ? [] : await store.readStream(stream, { from: 'start', maxCount });
  // A compacted stream starts at its summary's revision: what came before `at` may be gone.
  const events = opts.at === undefined ? read : read.filter((e) => e.revision <= opts.at!);
  const actorType = actorTypeOfStream(stream, opts.types ?? actorTypes);
  if (!actorType) {
    return {
      stream,
      actorType: null,
      steps: events.map((event) => ({ event, stateBefore: null, stateAfter: null, contextDiff: null })),
    };
  }
  return { stream, actorType: actorType.type, steps: replayStream(actorType, events, { maxValueChars: DIFF_VALUE_MAX_CHARS }) };
}
