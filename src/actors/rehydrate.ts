/**
 * Loading an actor from its stream (DESIGN §4 rules 5 and 9): the latest snapshot, then only the events after it,
 * folded through the pure transition with their actions discarded.
 */
import type { AnyMachineSnapshot } from 'xstate';
import { isBerthError } from '../../schemas/errors.ts';
import { CorruptEvent, type EventStore, type RecordedEvent } from '../store/event-store.ts';
import type { ActorType } from './actor-type.ts';
import { decodeStored, type StoredEvent } from './event-codec.ts';
import { initialSnapshot, restore, step } from './machine-step.ts';
import { machineVersion } from './machine-version.ts';
import { ACTOR_ADOPTED, ownerAfter, type Ownership } from './ownership.ts';
import { readLatestSnapshot, type StoredSnapshot } from './snapshot-stream.ts';

/** An actor's state as of `revision` of its stream (-1n: the stream does not exist yet). */
export interface LoadedActor extends Ownership {
  snapshot: AnyMachineSnapshot;
  revision: bigint;
  /** Set by a load: the revision of the snapshot it was restored from (-1n: folded from the first event). */
  base?: bigint;
}

export const streamOf = (actorType: ActorType, id: string): string => `${actorType.type}-${id}`;

/** A fresh actor: the machine's initial state, with input `actorType.input(id)` (default `{ id }`). */
export const freshActor = (actorType: ActorType, id: string): LoadedActor => ({
  snapshot: initialSnapshot(actorType.machine, actorType.input ? actorType.input(id) : { id }),
  revision: -1n,
  base: -1n,
});

/**
 * The actor restored from a snapshot folded by this very machine, else a fresh one (then every event is folded): a
 * snapshot of another machine version, or of none recorded, would not equal today's replay of the same events.
 */
export function fromSnapshot(actorType: ActorType, id: string, s: StoredSnapshot | undefined): LoadedActor {
  if (!s || s.machine !== machineVersion(actorType.machine)) return freshActor(actorType, id);
  try {
    return { snapshot: restore(actorType.machine, s.persisted), revision: s.revision, base: s.revision, owner: s.owner, ownerEpoch: s.ownerEpoch };
  } catch {
    // A snapshot is only a cache: a machine that changed shape folds from the start instead.
    return freshActor(actorType, id);
  }
}

/**
 * Folds stored events (in revision order, starting right after `from.revision`) onto `from`. Only a compaction's
 * summary may follow a gap: the events it replaced were removed with intent. An adoption moves the owner and leaves
 * the machine as it is.
 */
export function foldStored(actorType: ActorType, from: LoadedActor, events: StoredEvent[]): LoadedActor {
  let { snapshot, revision } = from;
  let ownership: Ownership = { owner: from.owner, ownerEpoch: from.ownerEpoch };
  for (const recorded of events) {
    if (recorded.revision <= revision) continue;
    if (recorded.revision !== revision + 1n && recorded.metadata.compacted !== true) {
      throw new CorruptEvent(recorded.stream, revision + 1n, 'missing from the stream (gap before the next event)');
    }
    if (recorded.type !== ACTOR_ADOPTED) [snapshot] = step(actorType.machine, snapshot, decodeStored(actorType, recorded));
    revision = recorded.revision;
    ownership = ownerAfter(ownership, recorded.metadata);
  }
  return { snapshot, revision, base: from.base, ...ownership };
}

async function eventsAfter(store: EventStore, stream: string, revision: bigint): Promise<RecordedEvent[]> {
  try {
    return await store.readStream(stream, { from: revision + 1n });
  } catch (e) {
    if (isBerthError(e, 'not_found')) return [];
    throw e;
  }
}

/** Brings a loaded actor up to its stream's head. */
export async function catchUp(store: EventStore, actorType: ActorType, stream: string, from: LoadedActor) {
  return foldStored(actorType, from, await eventsAfter(store, stream, from.revision));
}

export async function rehydrate(store: EventStore, actorType: ActorType, id: string): Promise<LoadedActor> {
  // Most loads of an uncached actor are of a new one (an execution being submitted): one look, no snapshot read.
  if ((await store.streamRevision(streamOf(actorType, id))) === 'no_stream') return freshActor(actorType, id);
  return rehydrateExisting(store, actorType, id);
}

/** Loads an actor whose stream is known to exist: its snapshot, then the events after. */
export async function rehydrateExisting(store: EventStore, actorType: ActorType, id: string): Promise<LoadedActor> {
  const stream = streamOf(actorType, id);
  return withOwner(store, stream, await catchUp(store, actorType, stream, fromSnapshot(actorType, id, await readLatestSnapshot(store, stream))));
}

/**
 * The loaded actor with its owner: one written before snapshots recorded it, and not written since, learns it from
 * the writer of its last event.
 */
export async function withOwner(store: EventStore, stream: string, loaded: LoadedActor): Promise<LoadedActor> {
  if (loaded.owner !== undefined || loaded.revision < 0n) return loaded;
  const [last] = await store.readStream(stream, { direction: 'backwards', maxCount: 1 });
  return last ? { ...loaded, ...ownerAfter({}, last.metadata) } : loaded;
}
