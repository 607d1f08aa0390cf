/**
 * Finding every unfinished actor in one pass over the log (DESIGN §4 rule 7), instead of reading the streams one by
 * one: each event whose metadata says `finished` lets the scan forget its actor; each snapshot lets it start from
 * there. At the end of each page the events it brought are folded onto their actors, so the scan holds one state
 * per live actor rather than every event since its start (buffering 200,000 events made garbage collection a
 * quarter of a recovery); an actor that finishes in a later page cost only the fold of the events before.
 */
import type { EventStore, StreamEvent } from '../store/event-store.ts';
import type { ActorType } from './actor-type.ts';
import { storedEventOf, type StoredEvent } from './event-codec.ts';
import { catchUp, foldStored, fromSnapshot, withOwner, type LoadedActor } from './rehydrate.ts';
import { decodeSnapshot, readLatestSnapshot, SNAPSHOT_PREFIX, type StoredSnapshot } from './snapshot-stream.ts';

export interface ScannedActor {
  actorType: ActorType;
  id: string;
  stream: string;
  loaded: LoadedActor;
}

interface Entry {
  actorType: ActorType;
  id: string;
  snapshot?: StoredSnapshot;
  /** The actor as folded up to the end of the last page (from its snapshot, or fresh); unset until then. */
  loaded?: LoadedActor;
  /** Events of this page not folded yet, in revision order. */
  events: StoredEvent[];
  finished: boolean;
  /** An event followed a finished one, or the events do not follow on from the state: read the stream instead. */
  reread: boolean;
  /** A stored event or snapshot of this actor that cannot be decoded. */
  error?: unknown;
}

export interface ScanResult {
  unfinished: ScannedActor[];
  /** Actors that cannot be rehydrated (a corrupt event or snapshot): reported, never skipped silently. */
  failed: { stream: string; error: unknown }[];
}

/** Maps a stream name to its registered actor type (the longest matching `<type>-` prefix) and actor id. */
export function streamResolver(types: Iterable<ActorType>) {
  const byLength = [...types].sort((a, b) => b.type.length - a.type.length);
  return (stream: string): { actorType: ActorType; id: string } | undefined => {
    for (const t of byLength) {
      if (stream.length > t.type.length + 1 && stream.startsWith(t.type) && stream[t.type.length] === '-') {
        return { actorType: t, id: stream.slice(t.type.length + 1) };
      }
    }
    return undefined;
  };
}

/**
 * Rehydrates the actors of the streams an index of unfinished actors lists (the projection engine keeps one), a
 * window at a time: what a start costs is the work in flight, not the log. Each window's events are read together
 * where the store can (`readStreams`). Streams of unregistered types are skipped. The window is small because a
 * window's events live until it is folded: 256 streams' worth (5,000 events in the recovery benchmark) outlived the
 * young generation and were copied and promoted by the GC, four times the bytes 32 streams cost.
 */
export async function loadListed(store: EventStore, types: Iterable<ActorType>, streams: readonly string[], window = 32): Promise<ScanResult> {
  const resolve = streamResolver(types);
  const result: ScanResult = { unfinished: [], failed: [] };
  for (let i = 0; i < streams.length; i += window) {
    const starts: ScannedActor[] = [];
    await Promise.all(
      streams.slice(i, i + window).map(async (stream) => {
        const r = resolve(stream);
        if (!r) return;
        try {
          starts.push({ ...r, stream, loaded: fromSnapshot(r.actorType, r.id, await readLatestSnapshot(store, stream)) });
        } catch (error) {
          result.failed.push({ stream, error });
        }
      }),
    );
    const read = await readTogether(store, starts);
    await Promise.all(
      starts.map(async ({ actorType, id, stream, loaded }) => {
        try {
          const events = read ? (read.get(stream) ?? []) : undefined;
          loaded = await withOwner(store, stream, events ? foldStored(actorType, loaded, events) : await catchUp(store, actorType, stream, loaded));
          result.unfinished.push({ actorType, id, stream, loaded });
        } catch (error) {
          result.failed.push({ stream, error });
        }
      }),
    );
  }
  return result;
}

/** The events after each start in one read, or undefined: a store without `readStreams`, or a row that does not decode. */
async function readTogether(store: EventStore, starts: ScannedActor[]): Promise<Map<string, StreamEvent[]> | undefined> {
  if (!store.readStreams) return undefined;
  try {
    return await store.readStreams(starts.map((a) => ({ stream: a.stream, from: a.loaded.revision + 1n })));
  } catch {
    // Read stream by stream instead, which reports the corrupt event against its own actor.
    return undefined;
  }
}

export async function scanUnfinished(
  store: EventStore,
  types: Iterable<ActorType>,
  pageSize = 10_000,
): Promise<ScanResult> {
  const resolve = streamResolver(types);
  const entries = new Map<string, Entry>();
  const entryOf = (stream: string): Entry | undefined => {
    let e = entries.get(stream);
    if (!e) {
      const r = resolve(stream);
      if (!r) return undefined;
      e = { ...r, events: [], finished: false, reread: false };
      entries.set(stream, e);
    }
    return e;
  };

  /** Folds what this page brought onto each actor it touched. */
  const foldPage = (touched: Set<Entry>) => {
    for (const e of touched) {
      if (e.finished || e.reread || e.error || e.events.length === 0) continue;
      const base = e.loaded ?? fromSnapshot(e.actorType, e.id, e.snapshot);
      if (e.events[0].revision !== base.revision + 1n) {
        e.reread = true;
      } else {
        try {
          e.loaded = foldStored(e.actorType, base, e.events);
        } catch (error) {
          e.error = error;
        }
      }
      e.events = [];
    }
  };

  let from: bigint | 'start' = 'start';
  for (;;) {
    const page = await store.readAll({ fromPosition: from, maxCount: pageSize });
    const touched = new Set<Entry>();
    for (const recorded of page) {
      if (recorded.stream.startsWith(SNAPSHOT_PREFIX)) {
        const e = entryOf(recorded.stream.slice(SNAPSHOT_PREFIX.length));
        if (!e) continue;
        try {
          const s = decodeSnapshot(recorded);
          // A snapshot behind what is folded already adds nothing; one ahead of it is the new starting point.
          if (s.revision > (e.loaded?.revision ?? e.snapshot?.revision ?? -1n)) {
            e.snapshot = s;
            e.loaded = undefined;
            e.events = e.events.filter((x) => x.revision > s.revision);
          }
        } catch (error) {
          e.error ??= error;
        }
        continue;
      }
      const e = entryOf(recorded.stream);
      if (!e) continue;
      if (e.finished) e.reread = true;
      e.finished = recorded.metadata.finished === true;
      if (e.finished || e.reread) {
        e.events = [];
        e.loaded = undefined;
      } else {
        e.events.push(storedEventOf(recorded));
        touched.add(e);
      }
    }
    foldPage(touched);
    if (page.length < pageSize) break;
    from = page[page.length - 1].position;
  }

  const result: ScanResult = { unfinished: [], failed: [] };
  for (const [stream, e] of entries) {
    if (e.finished) continue;
    try {
      if (e.error) throw e.error;
      const loaded = await withOwner(
        store,
        stream,
        e.reread ? await catchUp(store, e.actorType, stream, fromSnapshot(e.actorType, e.id, e.snapshot)) : (e.loaded ?? fromSnapshot(e.actorType, e.id, e.snapshot)),
      );
      result.unfinished.push({ actorType: e.actorType, id: e.id, stream, loaded });
    } catch (error) {
      result.failed.push({ stream, error });
    }
  }
  return result;
}
