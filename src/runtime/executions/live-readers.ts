/**
 * Who is reading an execution's output live from its spool, so that saving a large stream lets them catch up first.
 * The save copies and hashes the whole stream (256 MiB: most of a core for half a second); started while followers
 * are still behind, it takes that core from them, and on a small host they get the bytes at half speed. Their close
 * waits for the save either way (the terminal status comes after it), so letting them finish first costs them nothing
 * and gives them the bytes sooner. The wait is bounded: a reader that stops reading, or reads slowly, holds the save at
 * most `maxWaitMs`.
 */
import type { OutputStream } from '../../../schemas/output.ts';

interface LastRead {
  /** Where the latest read of the stream ended, and when (performance.now()). */
  next: number;
  at: number;
}

/** A reader that has not read for this long is not following any more (it left, or its client stopped reading). */
const IDLE_MS = 100;
const RECHECK_MS = 10;
/** Past this many streams noted, the idle ones are dropped (a stream no save asked about, e.g. one never saved). */
const PRUNE_AT = 256;

export class LiveReaders {
  private readonly reads = new Map<string, LastRead>();

  constructor(private readonly maxWaitMs = 1_000) {}

  /** A read of `stream` of execution `id` from its spool ended at `next`. */
  noteRead(id: string, stream: OutputStream, next: number): void {
    const key = `${id}/${stream}`;
    const at = performance.now();
    const last = this.reads.get(key);
    if (last) {
      last.next = next;
      last.at = at;
      return;
    }
    if (this.reads.size >= PRUNE_AT) for (const [k, read] of this.reads) if (at - read.at >= IDLE_MS) this.reads.delete(k);
    this.reads.set(key, { next, at });
  }

  /**
   * Resolves once no one is reading the first `size` bytes of the stream live any more (they have them all, or have
   * not read for IDLE_MS), or after `maxWaitMs` at most; forgets the stream. Resolves at once when it has no reader.
   */
  async caughtUp(id: string, stream: OutputStream, size: number, signal?: AbortSignal): Promise<void> {
    const key = `${id}/${stream}`;
    const deadline = performance.now() + this.maxWaitMs;
    for (;;) {
      const last = this.reads.get(key);
      const now = performance.now();
      if (!last || last.next >= size || now - last.at >= IDLE_MS || now >= deadline || signal?.aborted) break;
      await new Promise((resolve) => setTimeout(resolve, RECHECK_MS));
    }
    this.reads.delete(key);
  }
}
