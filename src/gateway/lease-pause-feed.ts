/**
 * A lease's pause feed: its recorded events (the stream replayed, then the audit feed filtered to it, live) read as
 * `data-pause`-like frames, one per change of state. The lease's `env` is never in a frame: only state, cause,
 * attempt and retry time are read from the events.
 */
import type { z } from 'zod';
import type { leasePauseFrameSchema } from '../../schemas/api.ts';
import type { PauseCause } from '../../schemas/events/lease.ts';
import type { Caller, RuntimeApi } from '../runtime/runtime-api.ts';
import type { RecordedEvent } from '../store/event-store.ts';

export type LeasePauseFrame = z.infer<typeof leasePauseFrameSchema>;

export interface PositionedFrame {
  position: bigint;
  frame: LeasePauseFrame;
}

/** Folds a lease's events into frames: the attempt counts pauses (a hold of a running lease is a pause of its own). */
class PauseFold {
  private pauses = 0;
  private current: { cause: PauseCause; attempt: number } | null = null;

  constructor(private readonly key: string) {}

  frameOf(event: RecordedEvent): LeasePauseFrame | undefined {
    const data = event.data as { at: number; cause?: PauseCause; retryAt?: number };
    const frame = (state: LeasePauseFrame['state'], retryAt: number | null = null): LeasePauseFrame => ({
      key: this.key,
      state,
      cause: this.current?.cause ?? null,
      attempt: this.current?.attempt ?? null,
      retryAt,
      at: data.at,
    });
    switch (event.type) {
      case 'lease.paused':
        this.current = { cause: data.cause!, attempt: ++this.pauses };
        return frame('paused', data.retryAt ?? null);
      case 'lease.held':
        this.current ??= { cause: { kind: 'held' }, attempt: ++this.pauses };
        return frame('held');
      case 'lease.resumed':
        this.current = null;
        return frame('running');
      case 'lease.release_requested':
        return frame('releasing');
      case 'lease.released':
        return frame('released');
      default:
        return undefined;
    }
  }
}

/**
 * The frames of lease `key` after global position `after` (all when undefined): those already recorded (read a page
 * at a time), then live ones until the lease is released. Not found (a plain error) for a key the caller has no
 * lease under.
 */
export async function leasePauseFeed(api: RuntimeApi, caller: Caller, key: string, after: bigint | undefined) {
  const lease = await api.leases.get(caller, key);
  const stream = `lease-${lease.id}`;
  const recorded = await api.replay(caller, stream);
  const fold = new PauseFold(key);
  let live: ReturnType<RuntimeApi['events']> | undefined;
  let closed = false;
  return {
    close: async () => {
      closed = true;
      await live?.close();
    },
    async *[Symbol.asyncIterator](): AsyncGenerator<PositionedFrame> {
      const emit = function* (event: RecordedEvent) {
        const frame = fold.frameOf(event);
        if (frame && (after === undefined || event.position > after)) yield { position: event.position, frame };
      };
      let last = -1n;
      for await (const page of recorded) {
        for (const { event } of page) {
          last = event.position;
          yield* emit(event);
          if (event.type === 'lease.released') return;
        }
      }
      if (closed) return;
      live = api.events(caller, last < 0n ? 'start' : last);
      for await (const event of live) {
        if (event.stream !== stream) continue;
        yield* emit(event);
        if (event.type === 'lease.released') return;
      }
    },
  };
}
