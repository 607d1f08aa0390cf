/**
 * The runtime's in-memory cache of loaded actors, least recently used first out. Writes are monotonic: an entry is
 * never replaced by an older revision, so a slow loader cannot roll an actor back.
 */
import type { LoadedActor } from './rehydrate.ts';

export class ActorCache {
  private readonly entries = new Map<string, LoadedActor>();

  constructor(private readonly capacity: number) {}

  get(stream: string): LoadedActor | undefined {
    const hit = this.entries.get(stream);
    if (hit) {
      this.entries.delete(stream);
      this.entries.set(stream, hit);
    }
    return hit;
  }

  put(stream: string, actor: LoadedActor): void {
    const current = this.entries.get(stream);
    if (current && current.revision > actor.revision) return;
    this.entries.delete(stream);
    this.entries.set(stream, actor);
    if (this.entries.size > this.capacity) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
  }

  /** Forget an actor whose stored state is uncertain (an append failed in an unknown way). */
  drop(stream: string): void {
    this.entries.delete(stream);
  }
}
