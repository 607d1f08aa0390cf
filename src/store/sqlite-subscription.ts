/**
 * A subscription to the SQLite store's global order: pages through the table from an exclusive position (catch-up),
 * then waits for an in-process append notice or the next poll (appends by other processes) and reads on (live).
 * Events always come from the table; a page is read only when the consumer asks for the next event.
 */
import type { EventEmitter } from 'node:events';
import { matchesFilter, type RecordedEvent, type Subscription, type SubscriptionFilter } from './event-store.ts';
import { decodeRow, type EventRow } from './sqlite-event-row.ts';

export interface SqliteSubscriptionOptions {
  fromPosition: bigint;
  filter?: SubscriptionFilter;
  pageSize: number;
  pollIntervalMs: number;
  /** Rows with a position strictly after `after`, in position order. */
  readPage(after: bigint, max: number): EventRow[];
  /** Emits 'appended' after every commit that wrote events. */
  notifier: EventEmitter;
  onClose(): void;
}

export class SqliteSubscription implements Subscription {
  private readonly opts: SqliteSubscriptionOptions;
  /** The last position read from the table, matching the filter or not. */
  private scanned: bigint;
  private buffer: EventRow[] = [];
  private closed = false;
  private wake?: () => void;

  constructor(opts: SqliteSubscriptionOptions) {
    this.opts = opts;
    this.scanned = opts.fromPosition;
  }

  [Symbol.asyncIterator](): AsyncIterator<RecordedEvent> {
    return {
      next: () => this.next(),
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.buffer = [];
    this.wake?.();
    this.opts.onClose();
  }

  private async next(): Promise<IteratorResult<RecordedEvent>> {
    for (;;) {
      if (this.closed) return { done: true, value: undefined };
      if (this.buffer.length > 0) {
        // Decode before dropping the row: a corrupt event fails every attempt to pass it, it is never skipped.
        const event = decodeRow(this.buffer[0]);
        this.buffer.shift();
        return { done: false, value: event };
      }
      // Positions commit in order (one writer at a time), so nothing can appear later behind `scanned`.
      const page = this.opts.readPage(this.scanned, this.opts.pageSize);
      if (page.length > 0) {
        this.scanned = page[page.length - 1].position;
        this.buffer = page.filter((row) => matchesFilter(row, this.opts.filter));
        continue;
      }
      await this.waitForAppend();
    }
  }

  /** Resolves on the next in-process commit, the next poll tick, or close. Registered right after an empty read,
   * in the same synchronous run, so an in-process commit cannot slip between the read and the wait. */
  private waitForAppend(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.opts.notifier.off('appended', done);
        this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, this.opts.pollIntervalMs);
      this.opts.notifier.on('appended', done);
      this.wake = done;
    });
  }
}
