/**
 * A subscription to the SQLite store's global order: pages through the table from an exclusive position (catch-up),
 * then waits on the store's append signal (in-process commits, or a poll for other processes) and reads on (live).
 * Events always come from the table; a page is read only when the consumer asks for the next event.
 */
import { matchesFilter, type RecordedEvent, type Subscription, type SubscriptionFilter } from './event-store.ts';
import type { AppendSignal } from './sqlite-append-signal.ts';
import { decodeRow, type EventRow } from './sqlite-event-row.ts';

/**
 * Pages read before the event loop is let turn. A consumer that takes each event at once (a feed whose client has
 * room, or that passes most events over) made the whole catch-up one chain of promise callbacks: no timer, socket or
 * other request ran until it ended (a member's feed over a million executions: 44 s, where nothing else answered).
 */
const PAGES_PER_TURN = 8;

export interface SqliteSubscriptionOptions {
  fromPosition: bigint;
  filter?: SubscriptionFilter;
  /** Awaited before each page is read (SubscribeOptions.pace). */
  pace?: () => Promise<void>;
  /** Inclusive: the last position read (SubscribeOptions.until). */
  until?: bigint;
  pageSize: number;
  /** Rows with a position strictly after `after`, in position order. */
  readPage(after: bigint, max: number): EventRow[];
  signal: AppendSignal;
  onClose(): void;
}

export class SqliteSubscription implements Subscription {
  private readonly opts: SqliteSubscriptionOptions;
  /** The last position read from the table, matching the filter or not. */
  private scanned: bigint;
  private buffer: EventRow[] = [];
  private readonly closing = new AbortController();
  /** Pages read since the event loop last turned. */
  private pagesThisTurn = 0;
  /** Calls to next() run one after another, as a for-await loop would make them. */
  private turn: Promise<unknown> = Promise.resolve();

  constructor(opts: SqliteSubscriptionOptions) {
    this.opts = opts;
    this.scanned = opts.fromPosition;
  }

  [Symbol.asyncIterator](): AsyncIterator<RecordedEvent> {
    return {
      next: () => {
        const result = this.turn.then(
          () => this.next(),
          () => this.next(),
        );
        this.turn = result;
        return result;
      },
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }

  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort();
    this.buffer = [];
    this.opts.onClose();
  }

  private async next(): Promise<IteratorResult<RecordedEvent>> {
    for (;;) {
      if (this.closing.signal.aborted) return { done: true, value: undefined };
      if (this.buffer.length > 0) {
        // Decode before dropping the row: a corrupt event fails every attempt to pass it, it is never skipped.
        const event = decodeRow(this.buffer[0]);
        this.buffer.shift();
        return { done: false, value: event };
      }
      const { until } = this.opts;
      if (until !== undefined && this.scanned >= until) return this.ended();
      // Positions commit in order (one writer at a time), so nothing can appear later behind `scanned`.
      if (this.pagesThisTurn >= PAGES_PER_TURN) {
        this.pagesThisTurn = 0;
        await new Promise(setImmediate);
        continue;
      }
      if (this.opts.pace) {
        await this.opts.pace();
        if (this.closing.signal.aborted) continue;
      }
      if (this.readNextPage()) {
        this.pagesThisTurn++;
        continue;
      }
      if (until !== undefined) return this.ended(); // nothing is left up to it
      this.pagesThisTurn = 0; // waiting lets it turn
      await this.opts.signal.wait(this.scanned, this.closing.signal);
    }
  }

  private async ended(): Promise<IteratorResult<RecordedEvent>> {
    await this.close();
    return { done: true, value: undefined };
  }

  /** Reads the page after `scanned` (up to `until`) into the buffer, the filter's events only; false when there was none. */
  private readNextPage(): boolean {
    const { filter, until } = this.opts;
    let page = this.opts.readPage(this.scanned, this.opts.pageSize);
    if (until !== undefined && page.length > 0 && page[page.length - 1][0] > until) page = page.filter(([position]) => position <= until);
    if (page.length === 0) return false;
    this.scanned = page[page.length - 1][0];
    this.buffer = page.filter(([position, stream, revision, , type]) => matchesFilter({ stream, type }, filter) && !filter?.skip?.({ stream, revision, position }));
    return true;
  }
}
