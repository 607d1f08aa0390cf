/**
 * One page of a stream's timeline for the web console: the replay steps (state before → after, context diff) of
 * revisions [from, from + limit), folded from the latest snapshot at or before the page (else from the stream's
 * start), so a page of a 10,000-event stream costs what a page of a short one does, wherever it is. `failures` keeps
 * only the steps that record a failure (that filter folds the stream from its start, a page at a time, up to the
 * failure after the page: a failure may be anywhere). An absent stream is `not_found`.
 */
import { fromSnapshot, foldStored } from '../../actors/rehydrate.ts';
import { decodeSnapshot, snapshotStreamOf, type StoredSnapshot } from '../../actors/snapshot-stream.ts';
import type { EventStore, RecordedEvent } from '../../store/event-store.ts';
import { actorTypeOfStream, actorTypes } from '../registry.ts';
import { replayStream } from '../../actors/replay.ts';
import { DIFF_VALUE_MAX_CHARS, replayStoredPages, type ReplayedStep } from './stream-replay.ts';

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
    // Folded a page at a time, up to the first failing step past the page: only those steps are held.
    const { actorType, pages } = await replayStoredPages(store, stream);
    const failing: ReplayedStep[] = [];
    for await (const page of pages) {
      failing.push(...page.filter((s) => recordsFailure(s.event) && Number(s.event.revision) >= opts.from));
      if (failing.length > opts.limit) break;
    }
    const more = failing[opts.limit];
    return { stream, actorType, ...bounds, steps: failing.slice(0, opts.limit), next: more ? Number(more.event.revision) : null };
  }
  const from = Math.max(opts.from, bounds.firstRevision);
  const end = from + opts.limit - 1;
  const next = end < bounds.lastRevision ? end + 1 : null;
  const actorType = actorTypeOfStream(stream, actorTypes);
  if (!actorType) {
    const events = await store.readStream(stream, { from: BigInt(from), maxCount: opts.limit });
    return { stream, actorType: null, ...bounds, steps: events.map((event) => ({ event, stateBefore: null, stateAfter: null, contextDiff: null })), next };
  }
  // A snapshot of another machine version (or none) folds from the start, as rehydration does.
  const snapshot = await snapshotAtOrBefore(store, stream, BigInt(from - 1));
  const start = fromSnapshot(actorType, stream.slice(actorType.type.length + 1), snapshot);
  const read = await store.readStream(stream, { from: start.revision < 0n ? 'start' : start.revision + 1n, maxCount: end - Number(start.revision) });
  // A compacted stream starts at its summary: a read from the start may reach past the page's end.
  const events = read.filter((e) => e.revision <= BigInt(end));
  const page = events.filter((e) => e.revision >= BigInt(from));
  const before = foldStored(actorType, start, events.slice(0, events.length - page.length));
  return { stream, actorType: actorType.type, ...bounds, steps: replayStream(actorType, page, { from: before, maxValueChars: DIFF_VALUE_MAX_CHARS }), next };
}

/**
 * The latest snapshot of `actorStream` that reflects `revision` or less, found by halving the snapshot stream (its
 * snapshots follow the actor's revisions). Undefined when there is none.
 */
async function snapshotAtOrBefore(store: EventStore, actorStream: string, revision: bigint): Promise<StoredSnapshot | undefined> {
  if (revision < 0n) return undefined;
  const stream = snapshotStreamOf(actorStream);
  const last = await store.streamRevision(stream);
  if (last === 'no_stream') return undefined;
  const at = async (r: bigint): Promise<StoredSnapshot | undefined> => {
    const [recorded] = await store.readStream(stream, { from: r, maxCount: 1 });
    return recorded && decodeSnapshot(recorded);
  };
  let [low, high] = [0n, last];
  let found: StoredSnapshot | undefined;
  while (low <= high) {
    const mid = (low + high) / 2n;
    const s = await at(mid);
    if (s && s.revision <= revision) {
      found = s;
      low = mid + 1n;
    } else high = mid - 1n;
  }
  return found;
}
