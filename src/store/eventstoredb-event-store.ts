/**
 * The EventStoreDB (KurrentDB) adapter of the event store port (DESIGN §3), over @eventstore/db-client 6 (gRPC): the
 * production store for more than one machine. Needs EventStoreDB 22.6 or later (stream reads carry positions).
 */
import {
  BACKWARDS,
  END,
  EventStoreDBClient,
  FORWARDS,
  START,
  jsonEvent,
  type AllStreamResolvedEvent,
  type AppendResult as ClientAppendResult,
  type AppendToStreamOptions,
  type DeleteResult,
  type DeleteStreamOptions,
  type Direction,
  type EventData as ClientEventData,
  type JSONType,
  type Position,
  type ReadAllOptions as ClientReadAllOptions,
  type ReadPosition,
  type ReadStreamOptions as ClientReadStreamOptions,
  type RecordedEvent as ClientRecordedEvent,
  type ResolvedEvent,
  type SetStreamMetadataOptions,
  type StreamMetadata,
  type StreamingRead,
  type SubscribeToAllOptions,
} from '@eventstore/db-client';
import { BerthError, isBerthError } from '../../schemas/errors.ts';
import {
  WrongExpectedVersion,
  type AppendOptions,
  type AppendResult,
  type CompactOptions,
  type EventData,
  type EventStore,
  type ExpectedRevision,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
  type Subscription,
} from './event-store.ts';
import {
  fromClientPosition,
  isSystemEvent,
  isTransient,
  positionOf,
  redactCredentials,
  toBerthError,
  toClientExpectedRevision,
  toClientPosition,
  toConnectionString,
  toRecordedEvent,
  toServerFilter,
  type ErrorContext,
} from './eventstoredb-mapping.ts';
import { retriesSpent } from './retry-budget.ts';
import { defaultRetryPolicy, withDeadline, withRetry, type RetryPolicy } from './eventstoredb-retry.ts';
import { EventStoreDbSubscription, type ClientSubscription } from './eventstoredb-subscription.ts';

/** The client calls this adapter makes: EventStoreDBClient in production. */
export interface EventStoreDbClient {
  appendToStream(
    stream: string,
    events: ClientEventData[],
    options: AppendToStreamOptions,
  ): Promise<ClientAppendResult>;
  readStream(stream: string, options: ClientReadStreamOptions): AsyncIterable<ResolvedEvent>;
  readAll(options: ClientReadAllOptions): AsyncIterable<AllStreamResolvedEvent>;
  subscribeToAll(options: SubscribeToAllOptions): ClientSubscription;
  setStreamMetadata(stream: string, metadata: StreamMetadata, options?: SetStreamMetadataOptions): Promise<ClientAppendResult>;
  deleteStream(stream: string, options?: DeleteStreamOptions): Promise<DeleteResult>;
  dispose(): Promise<void>;
}

export interface EventStoreDbOptions {
  /** Repeats of a call whose outcome is unknown (reads, and appends with an exact expected revision). */
  retry?: Partial<RetryPolicy>;
  /** Resubscriptions of a dropped subscription: consecutive attempts and their backoff. */
  resubscribe?: Partial<RetryPolicy>;
  /** Most events per round trip when readAll pages through $all. */
  pageSize?: number;
  /** How long a call may go unanswered (for a read: wait for its next event) before its outcome counts as unknown
   * (default 15 s, over the client's own 10 s deadline, which not every call has). */
  timeoutMs?: number;
}

/** Pages of $all are at least this long: system events between Berth's own would otherwise cost round trips. */
const MIN_PAGE = 64;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export class EventStoreDbEventStore implements EventStore {
  readonly kind = 'eventstoredb' as const;

  private readonly client: EventStoreDbClient;
  private readonly retry: RetryPolicy;
  private readonly resubscribe: RetryPolicy;
  private readonly pageSize: number;
  private readonly timeoutMs: number;
  private readonly subscriptions = new Set<EventStoreDbSubscription>();
  private closed = false;

  /** Takes a connected client; `connect` builds one from a URL. */
  constructor(client: EventStoreDbClient, options: EventStoreDbOptions = {}) {
    this.client = client;
    this.retry = { ...defaultRetryPolicy, ...options.retry };
    this.resubscribe = { attempts: 10, baseDelayMs: 100, maxDelayMs: 5_000, ...options.resubscribe };
    this.pageSize = Math.max(MIN_PAGE, options.pageSize ?? 512);
    this.timeoutMs = options.timeoutMs ?? 15_000;
  }

  /**
   * Connects to `esdb://…`, `esdb+discover://…` or `eventstoredb://host:port?…` (the client's connection string
   * options, e.g. `tls=false` for an insecure node). The client connects lazily, so one read of $all proves that the
   * server answers and lets these credentials read $all; it fails with `unavailable` otherwise.
   */
  static async connect(url: string, options: EventStoreDbOptions = {}): Promise<EventStoreDbEventStore> {
    let client: EventStoreDBClient;
    try {
      client = EventStoreDBClient.connectionString(toConnectionString(refuseIneffectiveOptions(url)));
    } catch (e) {
      if (e instanceof BerthError) throw e;
      throw new BerthError('invalid_request', `bad EventStoreDB URL: ${(e as Error).message}`, {
        url: redactCredentials(url),
      });
    }
    const store = new EventStoreDbEventStore(client, options);
    try {
      await store.read(() => client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, requiresLeader: true }), {});
    } catch (e) {
      await store.close();
      throw e;
    }
    return store;
  }

  async append(stream: string, events: EventData[], options: AppendOptions): Promise<AppendResult> {
    const expected = options.expectedRevision;
    const expectedRevision = toClientExpectedRevision(expected);
    const proposed = toClientEvents(stream, events);
    if (proposed.length === 0) return this.appendNothing(stream, expected);
    // The same ids at the same exact revision are recognised by the server, so an unknown outcome is retried; with
    // 'any' or 'stream_exists' the server only does its best to recognise them, so the outcome is reported instead.
    const repeatable = typeof expected === 'bigint' || expected === 'no_stream';
    const context = { stream, expected };
    let result: ClientAppendResult;
    try {
      result = await this.call(
        () => withDeadline(this.client.appendToStream(stream, proposed, { expectedRevision }), this.timeoutMs),
        context,
        repeatable,
      );
    } catch (e) {
      if (isBerthError(e, 'unavailable') && isTransient(e.cause)) {
        // This append's retry budget is spent here when it was repeatable: its callers report it, not repeat it.
        const spent = repeatable && this.retry.attempts > 1 ? retriesSpent : {};
        throw new BerthError('unavailable', `the outcome of an append to ${stream} is unknown: ${e.message}`, {
          stream,
          outcome: 'unknown',
          ...spent,
        }, { cause: e.cause });
      }
      throw e;
    }
    if (!result.success) {
      // Only with throwOnAppendFailure=false in the URL: the client reports the conflict instead of throwing it.
      throw new WrongExpectedVersion(stream, expected, await this.streamRevision(stream));
    }
    // An idempotent repeat may come back without a position (older servers send -1): read it from the stream.
    const position =
      fromClientPosition(result.position) ?? positionOf(await this.recordAt(stream, result.nextExpectedRevision));
    return { nextRevision: result.nextExpectedRevision, position };
  }

  /**
   * The summary is appended, then the stream's `$tb` (truncateBefore) set to its revision: reads start at the summary
   * at once, and the server's next scavenge removes the events before it from disk (until then `$all` still holds
   * them, in their places). The dropped streams are soft-deleted. Each step is safe to repeat.
   */
  async compactStream(stream: string, summary: EventData, options: CompactOptions): Promise<AppendResult> {
    const appended = await this.append(stream, [summary], { expectedRevision: options.expectedRevision });
    const truncateBefore = Number(appended.nextRevision);
    await this.call(() => withDeadline(this.client.setStreamMetadata(stream, { truncateBefore }), this.timeoutMs), { stream }, true);
    for (const dropped of options.dropStreams ?? []) {
      try {
        await this.call(() => withDeadline(this.client.deleteStream(dropped), this.timeoutMs), { stream: dropped }, true);
      } catch (e) {
        if (!isBerthError(e, 'not_found')) throw e;
      }
    }
    return appended;
  }

  async readStream(stream: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const direction = options.direction ?? 'forwards';
    const from = options.from ?? (direction === 'forwards' ? 'start' : 'end');
    const maxCount = options.maxCount === undefined || options.maxCount < 0 ? undefined : options.maxCount;
    if (maxCount === 0) {
      if ((await this.lastRecord(stream)) === undefined) throw notFound(stream);
      return [];
    }
    const resolved = await this.read(
      () =>
        this.client.readStream(stream, {
          direction: direction === 'forwards' ? FORWARDS : BACKWARDS,
          fromRevision: from === 'start' ? START : from === 'end' ? END : from,
          maxCount,
          requiresLeader: true,
        }),
      { stream },
    );
    return resolved.map((r) => toRecordedEvent(recordOf(r)));
  }

  /** Pages through $all from the position (the server's read includes it, the port's excludes it), leaving out
   * system events; the 6.x client has no server-side filter for reads. */
  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const limit = options.maxCount === undefined || options.maxCount < 0 ? Infinity : options.maxCount;
    let after = startAfter(options.fromPosition);
    let from: Position | typeof START = after === undefined ? START : toClientPosition(after);
    const out: RecordedEvent[] = [];
    while (out.length < limit) {
      const count = Math.min(this.pageSize, Math.max(MIN_PAGE, limit - out.length + 1));
      const page = await this.readAllPage(FORWARDS, from, count);
      for (const r of page) {
        const record = recordOf(r);
        const position = positionOf(record);
        if (after !== undefined && position <= after) continue;
        after = position;
        from = record.position ?? from;
        if (!isSystemEvent(record) && out.length < limit) out.push(toRecordedEvent(record));
      }
      if (page.length < count) break;
    }
    return out;
  }

  subscribeToAll(options: SubscribeOptions = {}): Subscription {
    this.assertOpen();
    // A listing up to a position reads every event up to it unfiltered by the server (the subscription filters them
    // itself): a server-side filter would hold back the events that show the end has gone by.
    const filter = options.until === undefined ? toServerFilter(options.filter) : undefined;
    const subscription = new EventStoreDbSubscription({
      open: (from) => {
        this.assertOpen();
        return this.client.subscribeToAll({ fromPosition: from, filter });
      },
      fromPosition: startAfter(options.fromPosition),
      filter: options.filter,
      ...(options.pace ? { pace: options.pace } : {}),
      ...(options.until !== undefined ? { until: options.until } : {}),
      resubscribe: this.resubscribe,
      onClose: () => this.subscriptions.delete(subscription),
    });
    this.subscriptions.add(subscription);
    return subscription;
  }

  async streamRevision(stream: string): Promise<bigint | 'no_stream'> {
    return (await this.lastRecord(stream))?.revision ?? 'no_stream';
  }

  /** The newest event that is not a system event, read backwards through $all. */
  async headPosition(): Promise<bigint> {
    let from: Position | typeof END = END;
    let before: bigint | undefined;
    for (;;) {
      const page = await this.readAllPage(BACKWARDS, from, MIN_PAGE);
      const bound = before;
      for (const r of page) {
        const record = recordOf(r);
        const position = positionOf(record);
        if (before !== undefined && position >= before) continue;
        if (!isSystemEvent(record)) return position;
        before = position;
        from = record.position ?? from;
      }
      if (page.length < MIN_PAGE || before === bound) return -1n;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.subscriptions].map((s) => s.close()));
    await this.client.dispose();
    await closeChannel(this.client);
  }

  private assertOpen(): void {
    if (this.closed) throw new BerthError('unavailable', 'the event store is closed');
  }

  /** Runs a client call, repeating it after a transient failure when `repeatable`, and maps its errors. */
  private async call<T>(op: () => Promise<T>, context: ErrorContext, repeatable: boolean): Promise<T> {
    const guarded = () => {
      this.assertOpen(); // a repeat after close() would reopen the client's channel
      return op();
    };
    try {
      return await withRetry(guarded, repeatable ? this.retry : { ...this.retry, attempts: 1 });
    } catch (err) {
      throw toBerthError(err, context);
    }
  }

  /** Every event of a client read (reads are safe to repeat). */
  private read<E>(open: () => AsyncIterable<E>, context: ErrorContext): Promise<E[]> {
    return this.call(() => collect(open(), this.timeoutMs), context, true);
  }

  private readAllPage(direction: Direction, fromPosition: ReadPosition, maxCount: number) {
    return this.read(() => this.client.readAll({ direction, fromPosition, maxCount, requiresLeader: true }), {});
  }

  /** The stream's last event, undefined when the stream does not exist. */
  private async lastRecord(stream: string): Promise<ClientRecordedEvent | undefined> {
    try {
      const [last] = await this.read(
        () => this.client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1, requiresLeader: true }),
        { stream },
      );
      return last === undefined ? undefined : recordOf(last);
    } catch (e) {
      if (isBerthError(e, 'not_found')) return undefined;
      throw e;
    }
  }

  private async recordAt(stream: string, revision: bigint): Promise<ClientRecordedEvent> {
    const [r] = await this.read(
      () => this.client.readStream(stream, { fromRevision: revision, maxCount: 1, requiresLeader: true }),
      { stream },
    );
    if (r === undefined) {
      throw new BerthError('internal', `${stream}@${revision} was appended but cannot be read`, { stream });
    }
    return recordOf(r);
  }

  /** An append of no events writes nothing: it only checks the expectation, as EventStoreDB's rules say. */
  private async appendNothing(stream: string, expected: ExpectedRevision): Promise<AppendResult> {
    const last = await this.lastRecord(stream);
    const holds =
      expected === 'any' ||
      (expected === 'no_stream'
        ? last === undefined
        : expected === 'stream_exists'
          ? last !== undefined
          : last?.revision === expected);
    if (!holds) throw new WrongExpectedVersion(stream, expected, last?.revision ?? 'no_stream');
    return { nextRevision: last?.revision ?? -1n, position: last === undefined ? -1n : positionOf(last) };
  }
}

/** Every event of a client read; the time bound is per event, so a long read that keeps delivering is not cut. */
async function collect<E>(source: AsyncIterable<E>, timeoutMs: number): Promise<E[]> {
  const events = source[Symbol.asyncIterator]();
  const out: E[] = [];
  for (;;) {
    const step = await withDeadline(events.next(), timeoutMs, () => abandon(source));
    if (step.done) return out;
    out.push(step.value);
  }
}

/** Stops a client read nobody waits for: cancel() ends its gRPC call, destroy() the stream reading from it. */
function abandon(source: AsyncIterable<unknown>): void {
  const read = source as Partial<Pick<StreamingRead<unknown>, 'cancel' | 'destroy'>>;
  read.cancel?.().catch(() => undefined);
  read.destroy?.();
}

/** The port's exclusive start as a position, undefined for "from the beginning". */
const startAfter = (from: bigint | 'start' | undefined): bigint | undefined =>
  from === undefined || from === 'start' || from < 0n ? undefined : from;

const notFound = (stream: string) => new BerthError('not_found', `stream ${stream} does not exist`, { stream });

/** Links are not resolved, so every resolved event carries its own record. */
function recordOf(r: ResolvedEvent | AllStreamResolvedEvent): ClientRecordedEvent {
  if (r.event === undefined) throw new BerthError('internal', 'EventStoreDB sent a resolved event without its record');
  return r.event;
}

/** The client's JSON events, checked first: ids must be distinct uuids and data and metadata JSON. */
function toClientEvents(stream: string, events: EventData[]): ClientEventData[] {
  const seen = new Set<string>();
  return events.map((e) => {
    const invalid = (why: string) =>
      new BerthError('invalid_request', `an event appended to ${stream} ${why}`, { stream });
    if (typeof e.id !== 'string' || !UUID.test(e.id)) throw invalid(`has id "${String(e.id)}", not a uuid`);
    if (typeof e.type !== 'string' || e.type === '') throw invalid('has no type');
    if (seen.has(e.id.toLowerCase())) throw invalid(`repeats id ${e.id}`);
    seen.add(e.id.toLowerCase());
    const data = e.data ?? null;
    try {
      // The client serialises inside a promise executor, where a failure would leave the append pending forever.
      JSON.stringify([data, e.metadata]);
    } catch (err) {
      throw invalid(`is not JSON: ${(err as Error).message}`);
    }
    // The server parses ids as Guids and reads them back lowercase: the same case here keeps ids comparable.
    return jsonEvent({ id: e.id.toLowerCase(), type: e.type, data: data as JSONType, metadata: e.metadata });
  });
}

/**
 * Connection-string options the 6.x client accepts but does not honour are refused rather than silently ignored:
 * `tlsVerifyCert=false` (the client warns and still verifies the certificate; pass `tlsCAFile` instead) and
 * credentials with `tls=false` (the client drops them on an insecure channel, so the server sees no user).
 */
function refuseIneffectiveOptions(url: string): string {
  const query = new URLSearchParams(url.split('?')[1] ?? '');
  const shown = redactCredentials(url);
  if (query.get('tlsVerifyCert')?.toLowerCase() === 'false') {
    const message = 'tlsVerifyCert=false has no effect with this client (the certificate is still verified): pass tlsCAFile=<the CA file>';
    throw new BerthError('invalid_request', message, { url: shown });
  }
  const hasCredentials = /^[^:]+:\/\/[^/?]*@/.test(url);
  if (hasCredentials && query.get('tls')?.toLowerCase() === 'false') {
    const message = 'credentials are not sent over tls=false (the client drops them): enable TLS or remove them';
    throw new BerthError('invalid_request', message, { url: shown });
  }
  return url;
}

/**
 * The client's dispose() cancels its calls but leaves its gRPC channel, and so its connection, open. After a
 * reconnect the client may have no channel: getChannel then makes one (unconnected) only for it to be closed, and a
 * failure to resolve one leaves nothing to close.
 */
async function closeChannel(client: EventStoreDbClient): Promise<void> {
  const withChannel = client as Partial<{ getChannel(): Promise<{ close(): void }> }>;
  if (typeof withChannel.getChannel !== 'function') return;
  const channel = await withChannel.getChannel.call(client).catch(() => undefined);
  channel?.close();
}
