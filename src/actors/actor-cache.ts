/**
 * The runtime's in-memory cache of loaded actors, least recently used first out, bounded in entries and in bytes: an
 * actor's context holds what its events brought (an execution's command, up to the 1 MiB request body), so 20,000
 * entries counted alone could keep gigabytes of finished executions. Writes are monotonic: an entry is never replaced
 * by an older revision, so a slow loader cannot roll an actor back.
 */
import { jsonSizeAtMost } from './json-size.ts';
import type { LoadedActor } from './rehydrate.ts';

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
  private readonly entries = new Map<string, { actor: LoadedActor; bytes: number }>();
  private total = 0;

  constructor(
    private readonly capacity: number,
    private readonly maxBytes = 256 * 1024 * 1024,
  ) {}

  get(stream: string): LoadedActor | undefined {
    const hit = this.entries.get(stream);
    if (hit) {
      this.entries.delete(stream);
      this.entries.set(stream, hit);
    }
    return hit?.actor;
  }

  put(stream: string, actor: LoadedActor): void {
    const current = this.entries.get(stream);
    if (current && current.actor.revision > actor.revision) return;
    this.drop(stream);
    const bytes = weigh(actor, this.maxBytes);
    this.entries.set(stream, { actor, bytes });
    this.total += bytes;
    while (this.entries.size > 1 && (this.entries.size > this.capacity || this.total > this.maxBytes)) {
      this.drop(this.entries.keys().next().value as string);
    }
  }

  /** Forget an actor whose stored state is uncertain (an append failed in an unknown way). */
  drop(stream: string): void {
    const entry = this.entries.get(stream);
    if (!entry) return;
    this.entries.delete(stream);
    this.total -= entry.bytes;
  }

  /** What the cache holds now, by the weights it keeps (tests). */
  get bytes(): number {
    return this.total;
  }
}
