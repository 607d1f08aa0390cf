/**
 * The runtime's in-memory cache of loaded actors (a BoundedLru: an actor's context holds what its events brought, an
 * execution's command included), each weighed by its context. Writes are monotonic: an entry is never replaced by an
 * older revision, so a slow loader cannot roll an actor back.
 */
import { jsonSizeAtMost } from './json-size.ts';
import type { LoadedActor } from './rehydrate.ts';
import { BoundedLru } from '../store/bounded-lru.ts';

/**
 * Nodes of a context looked at to weigh it (more than a request can put in one: 4,096 command arguments); past them
 * what was counted is its weight.
 */
const WEIGHED_NODES = 10_000;
/** What an entry costs besides its context (the snapshot, the map's slot). */
const ENTRY_BYTES = 512;

/** About what an actor keeps in memory: its context's JSON size, at most `most`. */
const weigh = (actor: LoadedActor, most: number): number => Math.min(most, ENTRY_BYTES + jsonSizeAtMost(actor.snapshot.context, most, WEIGHED_NODES));

export class ActorCache {
  private readonly entries: BoundedLru<LoadedActor>;

  constructor(
    capacity: number,
    private readonly maxBytes = 256 * 1024 * 1024,
  ) {
    this.entries = new BoundedLru(capacity, maxBytes);
  }

  get(stream: string): LoadedActor | undefined {
    return this.entries.get(stream);
  }

  put(stream: string, actor: LoadedActor): void {
    const current = this.entries.get(stream);
    if (current && current.revision > actor.revision) return;
    this.entries.set(stream, actor, weigh(actor, this.maxBytes));
  }

  /** Forget an actor whose stored state is uncertain (an append failed in an unknown way). */
  drop(stream: string): void {
    this.entries.delete(stream);
  }

  /** What the cache holds now, by the weights it keeps (tests). */
  get bytes(): number {
    return this.entries.bytes;
  }
}
