/**
 * The port's subscription over EventStoreDB's $all: catch-up then live through the client's subscribeToAll, pulled one
 * event at a time (the client's subscription is a Node stream, so an unread consumer stops the gRPC flow), with system
 * events and the filter part the server cannot apply removed here, and resubscription after a drop.
 */
import { START, UnavailableError, type AllStreamResolvedEvent, type Position } from '@eventstore/db-client';
import { matchesFilter, PACED_EVENTS, type RecordedEvent, type Subscription, type SubscriptionFilter } from './event-store.ts';
import {
  isSystemEvent,
  isTransient,
  positionOf,
  toBerthError,
  toClientPosition,
  toRecordedEvent,
} from './eventstoredb-mapping.ts';
import { backoffMs, type RetryPolicy } from './eventstoredb-retry.ts';

/** What is used of the client's subscription (a Node readable stream in objectMode). */
export interface ClientSubscription extends AsyncIterable<AllStreamResolvedEvent> {
  unsubscribe(): Promise<void>;
  destroy(error?: Error): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
}

export interface EventStoreDbSubscriptionOptions {
  /** Opens the client's subscription after `from` (exclusive; 'start' = from the beginning), filtered by the server. */
  open(from: Position | typeof START): ClientSubscription;
  /** Exclusive start; undefined = from the beginning. */
  fromPosition?: bigint;
  filter?: SubscriptionFilter;
  /** Awaited before every PACED_EVENTS events pulled (SubscribeOptions.pace). */
  pace?: () => Promise<void>;
  /** Inclusive: the last position delivered or passed over (SubscribeOptions.until). */
  until?: bigint;
  /** Consecutive failed (re)subscriptions allowed, and the backoff between them. */
  resubscribe: RetryPolicy;
  onClose(): void;
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

export class EventStoreDbSubscription implements Subscription {
  private readonly opts: EventStoreDbSubscriptionOptions;
  /** Position of the last event delivered to the consumer or passed over by the filter: a resubscription starts after
   * it, so the consumer sees no gap and no duplicate. */
  private checkpoint: bigint | undefined;
  private source?: ClientSubscription;
  private events?: AsyncIterator<AllStreamResolvedEvent>;
  /** An event that failed to decode: offered again on the next call, never skipped. */
  private held?: AllStreamResolvedEvent;
  private failures = 0;
  /** Events pulled so far: `pace` is awaited before every PACED_EVENTS of them. */
  private pulled = 0;
  private closed = false;
  private wake?: () => void;

  constructor(opts: EventStoreDbSubscriptionOptions) {
    this.opts = opts;
    this.checkpoint = opts.fromPosition;
  }

  [Symbol.asyncIterator](): AsyncIterator<RecordedEvent> {
    return {
      next: () => this.next(),
      return: async () => {
        await this.close();
        return DONE;
      },
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.wake?.();
    await this.stopSource();
    this.opts.onClose();
  }

  private async next(): Promise<IteratorResult<RecordedEvent>> {
    for (;;) {
      if (this.closed) return DONE;
      const { until } = this.opts;
      if (until !== undefined && this.checkpoint !== undefined && this.checkpoint >= until) return this.ended();
      let resolved = this.held;
      this.held = undefined;
      if (!resolved) {
        if (this.opts.pace && this.pulled++ % PACED_EVENTS === 0) {
          await this.opts.pace();
          if (this.closed) return DONE;
        }
        let step: IteratorResult<AllStreamResolvedEvent>;
        try {
          this.events ??= this.subscribe();
          step = await this.events.next();
        } catch (err) {
          if (this.closed) return DONE;
          await this.dropped(err);
          continue;
        }
        if (this.closed) return DONE;
        if (step.done) {
          // The server ended the call: as much a drop as an error is.
          await this.dropped(new UnavailableError(undefined, 'the server ended the subscription'));
          continue;
        }
        this.failures = 0;
        resolved = step.value;
      }
      // Without link resolution every resolved event carries its record (links are system events, dropped below).
      const event = resolved.event;
      if (!event) continue;
      const position = positionOf(event);
      // The server starts after the checkpoint already; this guard keeps the promise if it ever does not.
      if (this.checkpoint !== undefined && position <= this.checkpoint) continue;
      if (until !== undefined && position > until) return this.ended(); // what was left up to it has gone
      const { filter } = this.opts;
      if (isSystemEvent(event) || !matchesFilter({ stream: event.streamId, type: event.type }, filter) || filter?.skip?.({ stream: event.streamId, revision: event.revision, position })) {
        this.checkpoint = position;
        continue;
      }
      let recorded: RecordedEvent;
      try {
        recorded = toRecordedEvent(event);
      } catch (err) {
        this.held = resolved;
        throw err;
      }
      this.checkpoint = position;
      return { done: false, value: recorded };
    }
  }

  private async ended(): Promise<IteratorResult<RecordedEvent>> {
    await this.close();
    return DONE;
  }

  private subscribe(): AsyncIterator<AllStreamResolvedEvent> {
    const source = this.opts.open(this.checkpoint === undefined ? START : toClientPosition(this.checkpoint));
    // The iterator below observes errors while it runs; this keeps a late one (after it ended) from going unhandled.
    source.on('error', () => undefined);
    this.source = source;
    return source[Symbol.asyncIterator]();
  }

  /** After a drop: resubscribe from the checkpoint with backoff, or give up with the error when it is not transient
   * or too many attempts in a row failed. */
  private async dropped(err: unknown): Promise<void> {
    await this.stopSource();
    this.failures++;
    if (!isTransient(err) || this.failures >= this.opts.resubscribe.attempts) throw toBerthError(err);
    await this.pause(backoffMs(this.opts.resubscribe, this.failures));
  }

  private async stopSource(): Promise<void> {
    const source = this.source;
    this.source = undefined;
    this.events = undefined;
    if (!source) return;
    source.destroy(); // ends a read waiting on the stream
    await source.unsubscribe().catch(() => undefined); // cancels the gRPC call, which may have failed already
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }
}
