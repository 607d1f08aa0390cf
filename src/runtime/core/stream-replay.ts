/**
 * Replays one stored stream (for `berth replay` and the gateway's `/v1/streams/{stream}`): reads it up to a revision
 * and folds it through the actor type its category names, giving the machine state before and after each event.
 * A stream whose category has no registered actor type is returned as events without states (`actorType` null).
 */
import type { StateValue } from 'xstate';
import type { ActorType } from '../../actors/actor-type.ts';
import type { LoadedActor } from '../../actors/rehydrate.ts';
import { replaySteps } from '../../actors/replay.ts';
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

/** Events folded at a time: a replay is answered a page at a time, never held whole (a stream has no length bound). */
export const REPLAY_PAGE_EVENTS = 64;

export interface StreamReplayPages {
  stream: string;
  actorType: string | null;
  /** The steps in revision order, a page at a time; each page is read and folded when the one before is taken. */
  pages: AsyncIterable<ReplayedStep[]>;
}

/**
 * `at`: stop at this revision (inclusive). Throws `not_found` for an absent stream, before any page (its first page
 * is read at once). The fold goes on from page to page, so each event is folded once.
 */
export async function replayStoredPages(
  store: EventStore,
  stream: string,
  opts: { at?: bigint; types?: ActorType[]; pageEvents?: number } = {},
): Promise<StreamReplayPages> {
  const { at } = opts;
  const size = opts.pageEvents ?? REPLAY_PAGE_EVENTS;
  const read = async (from: bigint | 'start') => {
    const events = await store.readStream(stream, { from, maxCount: size });
    const last = events.at(-1)?.revision;
    // A compacted stream starts at its summary's revision: what came before `at` may be gone.
    const kept = at === undefined ? events : events.filter((e) => e.revision <= at);
    return { events: kept, next: events.length === size && (at === undefined || last! < at) ? last! + 1n : undefined };
  };
  const first = at !== undefined && at < 0n ? { events: [], next: undefined } : await read('start');
  const actorType = actorTypeOfStream(stream, opts.types ?? actorTypes);
  async function* pages(): AsyncGenerator<ReplayedStep[]> {
    let page: { events: RecordedEvent[]; next: bigint | undefined } = first;
    let actor: LoadedActor | undefined;
    for (;;) {
      if (!actorType) {
        yield page.events.map((event) => ({ event, stateBefore: null, stateAfter: null, contextDiff: null }));
      } else {
        const replayed = replaySteps(actorType, page.events, { ...(actor ? { from: actor } : {}), maxValueChars: DIFF_VALUE_MAX_CHARS });
        actor = replayed.after;
        yield replayed.steps;
      }
      if (page.next === undefined) return;
      page = await read(page.next);
    }
  }
  return { stream, actorType: actorType?.type ?? null, pages: pages() };
}

/** The whole replay at once (`berth replay` on a local store, tests): the pages gathered. */
export async function replayStoredStream(
  store: EventStore,
  stream: string,
  opts: { at?: bigint; types?: ActorType[] } = {},
): Promise<StreamReplay> {
  const { actorType, pages } = await replayStoredPages(store, stream, opts);
  return { stream, actorType, steps: await gathered(pages) };
}

/** Every item of a paged answer, in order (a whole replay, where it is known to be short or wanted whole). */
export async function gathered<T>(pages: AsyncIterable<T[]>): Promise<T[]> {
  const items: T[] = [];
  for await (const page of pages) items.push(...page);
  return items;
}
