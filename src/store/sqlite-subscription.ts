/**
 * A subscription to the SQLite store's global order: pages through the table from an exclusive position (catch-up),
 * then waits on the store's append signal (in-process commits, or a poll for other processes) and reads on (live).
 * Events always come from the table; a page is read only when the consumer asks for the next event.
 */
import { matchesFilter, type RecordedEvent, type Subscription, type SubscriptionFilter } from './event-store.ts';
import type { AppendSignal } from './sqlite-append-signal.ts';
import { decodeRow, type EventRow, type PlaceRow } from './sqlite-event-row.ts';

/** Pages passed over whole (a filter's, or a member feed's skip test) read before the event loop is let turn. */
const PASSED_PAGES_PER_TURN = 8;

export interface SqliteSubscriptionOptions {
  fromPosition: bigint;
  filter?: SubscriptionFilter;
  pageSize: number;
  /** Rows with a position strictly after `after`, in position order. */
  readPage(after: bigint, max: number): EventRow[];
  /**
   * With the filter's skip test: pages are read by place (no payloads), and each event kept is read whole as it is
   * taken, so the events passed over cost their place only (a member's feed passes over most of the log).
   */
  byPlace?: { readPlaces(after: bigint, max: number): PlaceRow[]; readRow(position: bigint): EventRow | undefined };
  signal: AppendSignal;
  onClose(): void;
}

export class SqliteSubscription implements Subscription {
  private readonly opts: SqliteSubscriptionOptions;
  /** The last position read from the table, matching the filter or not. */
  private scanned: bigint;
  /** Rows to deliver, or (read by place) the positions of the events to read whole. */
  private buffer: (EventRow | bigint)[] = [];
  private readonly closing = new AbortController();
  /** Pages read in a row that the filter passed over whole. */
  private passedPages = 0;
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
        const next = this.buffer[0];
        const row = typeof next === 'bigint' ? this.opts.byPlace!.readRow(next) : next;
        // Decode before dropping the row: a corrupt event fails every attempt to pass it, it is never skipped. (A row
        // read by place and gone meanwhile was dropped by a compaction or retention: there is nothing to pass.)
        const event = row && decodeRow(row);
        this.buffer.shift();
        if (!event) continue;
        this.passedPages = 0;
        return { done: false, value: event };
      }
      // Positions commit in order (one writer at a time), so nothing can appear later behind `scanned`.
      if (this.readNextPage()) {
        // Pages the filter passed over whole are read on at once, a few at a time: the event loop turns between.
        if (this.buffer.length === 0 && ++this.passedPages % PASSED_PAGES_PER_TURN === 0) await new Promise(setImmediate);
        continue;
      }
      await this.opts.signal.wait(this.scanned, this.closing.signal);
    }
  }

  /** Reads the page after `scanned` into the buffer, the filter's events only; false when there was none. */
  private readNextPage(): boolean {
    const { filter, byPlace, pageSize } = this.opts;
    const kept = ([position, stream, revision, type]: PlaceRow) => matchesFilter({ stream, type }, filter) && !filter?.skip?.({ stream, revision, position });
    if (byPlace) {
      const places = byPlace.readPlaces(this.scanned, pageSize);
      if (places.length === 0) return false;
      this.scanned = places[places.length - 1][0];
      this.buffer = places.filter(kept).map(([position]) => position);
    } else {
      const page = this.opts.readPage(this.scanned, pageSize);
      if (page.length === 0) return false;
      this.scanned = page[page.length - 1][0];
      this.buffer = page.filter(([position, stream, revision, , type]) => kept([position, stream, revision, type]));
    }
    return true;
  }
}
