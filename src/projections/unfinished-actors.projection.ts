/**
 * The unfinished operations (seed 000): every actor stream whose last transition did not reach a final state, by the
 * `finished` flag the actor runtime stamps on each transition's metadata. Recovery rehydrates exactly these, so a
 * start costs the work in flight, not a scan of the log. Streams the actor runtime did not write (snapshots, epoch
 * fences) carry no `actorType` and are not actors.
 */
import { defineProjection, table, type Tables } from './projection.ts';
import type { RecordedEvent } from '../store/event-store.ts';

export interface UnfinishedActor {
  stream: string;
  actorType: string;
}

function reduce(t: Tables<{ streams: UnfinishedActor }>, e: RecordedEvent): void {
  const { actorType, finished } = e.metadata;
  if (typeof actorType !== 'string') return;
  if (finished === true) t.streams.delete(e.stream);
  else if (!t.streams.get(e.stream)) t.streams.put(e.stream, { stream: e.stream, actorType });
}

export const unfinishedActorsProjection = defineProjection({
  name: 'unfinished-actors',
  version: 1,
  tables: { streams: table<UnfinishedActor>() },
  reduce,
  queries: {
    streams: (t): string[] => t.streams.all().map((a) => a.stream),
  },
});
