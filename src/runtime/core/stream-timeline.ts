/**
 * One page of a stream's timeline for the web console: the replay steps (state before → after, context diff) of
 * revisions [from, from + limit), folded from the stream's start only as far as the page's end, so the first page of
 * a 10,000-event stream costs what the first page of a short one does. `failures` keeps only the steps that record a
 * failure (that filter folds the whole stream: a failure may be anywhere). An absent stream is `not_found`.
 */
import type { ReplayedStep } from './stream-replay.ts';
import type { EventStore, RecordedEvent } from '../../store/event-store.ts';
import { replayStoredStream } from './stream-replay.ts';

export interface TimelinePage {
  stream: string;
  actorType: string | null;
  /** The first and last revisions the stream holds (a compacted stream starts past 0). */
  firstRevision: number;
  lastRevision: number;
  steps: ReplayedStep[];
  /** The `from` of the next page, or null on the last one. */
  next: number | null;
}

/**
 * What a console user means by "failures only": an outcome that went wrong, by its event type or its data (a
 * failure or an error recorded, a command that exited non-zero or by a signal).
 */
const FAILURE_TYPE = /(^|[._])(failed|failure|unknown|lost|absent|rejected|timed_out|exceeded|interrupted|error)($|[._])/;
export const recordsFailure = (event: RecordedEvent): boolean => {
  if (FAILURE_TYPE.test(event.type)) return true;
  const data = event.data as Record<string, unknown> | null;
  if (!data || typeof data !== 'object') return false;
  const set = (key: string) => (data[key] ?? null) !== null;
  return set('failure') || set('error') || set('signal') || (typeof data.exitCode === 'number' && data.exitCode !== 0);
};

export async function timelinePage(
  store: EventStore,
  stream: string,
  opts: { from: number; limit: number; failures: boolean },
): Promise<TimelinePage> {
  const [first] = await store.readStream(stream, { from: 'start', maxCount: 1 });
  const last = await store.streamRevision(stream);
  const bounds = { firstRevision: Number(first.revision), lastRevision: last === 'no_stream' ? Number(first.revision) : Number(last) };
  if (opts.failures) {
    const all = await replayStoredStream(store, stream);
    const failing = all.steps.filter((s) => recordsFailure(s.event) && Number(s.event.revision) >= opts.from);
    const steps = failing.slice(0, opts.limit);
    const more = failing[opts.limit];
    return { stream, actorType: all.actorType, ...bounds, steps, next: more ? Number(more.event.revision) : null };
  }
  const end = Math.max(opts.from, bounds.firstRevision) + opts.limit - 1;
  const replay = await replayStoredStream(store, stream, { at: BigInt(end) });
  const steps = replay.steps.filter((s) => Number(s.event.revision) >= opts.from);
  return { stream, actorType: replay.actorType, ...bounds, steps, next: end < bounds.lastRevision ? end + 1 : null };
}
