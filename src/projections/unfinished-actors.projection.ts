/**
 * The unfinished operations (seed 000): every actor stream whose last transition did not reach a final state, by the
 * `finished` flag the actor runtime stamps on each transition's metadata, with the runtime that owns it (the writer
 * of its latest event: src/actors/ownership.ts). Recovery rehydrates exactly the ones its runtime owns, so a start
 * costs the work in flight, not a scan of the log; a retirement lists what the retired runtime leaves to adopt.
 * Streams the actor runtime did not write (snapshots, epoch fences) carry no `actorType` and are not actors.
 */
import { defineProjection, table, type Tables } from './projection.ts';
import type { RecordedEvent } from '../store/event-store.ts';

export interface UnfinishedActor {
  stream: string;
  actorType: string;
  /** Null while no runtime has written it (events imported by hand). */
  owner: string | null;
}

function reduce(t: Tables<{ streams: UnfinishedActor }>, e: RecordedEvent): void {
  const { actorType, finished, runtimeId } = e.metadata;
  if (typeof actorType !== 'string') return;
  if (finished === true) return t.streams.delete(e.stream);
  const row = t.streams.get(e.stream);
  const owner = typeof runtimeId === 'string' ? runtimeId : (row?.owner ?? null);
  if (!row || row.owner !== owner) t.streams.put(e.stream, { stream: e.stream, actorType, owner });
}

export const unfinishedActorsProjection = defineProjection({
  name: 'unfinished-actors',
  version: 2,
  tables: { streams: table<UnfinishedActor>({ columns: ['owner'], indexes: [['owner']] }) },
  reduce,
  queries: {
    /**
     * The streams `runtimeId` recovers: its own and the unowned (any runtime may write those). Keys only: a start
     * lists 10,000 of them, and reading and parsing their rows cost about a tenth of recovering them.
     */
    streams: (t, runtimeId: string): string[] => [...t.streams.keys({ owner: runtimeId }), ...t.streams.keys({ owner: null })],
    /** The unfinished actors `runtimeId` owns. */
    ownedBy: (t, runtimeId: string): UnfinishedActor[] => t.streams.all({ owner: runtimeId }),
  },
});
