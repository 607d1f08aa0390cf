/**
 * The event store port (DESIGN §3): EventStoreDB semantics, so the embedded SQLite adapter and the EventStoreDB
 * adapter pass one conformance suite. Revisions are zero-based per stream; positions are global and increasing.
 */
import { BerthError } from '../../schemas/errors.ts';

export type ExpectedRevision = 'no_stream' | 'stream_exists' | 'any' | bigint;

/** An event to append. `id` is a uuid; re-appending the same ids at the same position is a no-op. */
export interface EventData {
  id: string;
  type: string;
  data: unknown;
  metadata?: Record<string, unknown>;
}

export interface RecordedEvent {
  id: string;
  stream: string;
  revision: bigint;
  position: bigint;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
  /** ISO-8601 time the store recorded the event. */
  createdAt: string;
}

/**
 * An event as folding it onto its stream's state needs it, which is what `readStreams` returns: without the id,
 * position and time of a RecordedEvent (leaving them out made SQLite's part of recovery's 200,000-row read a third
 * shorter).
 */
export type StreamEvent = Pick<RecordedEvent, 'stream' | 'revision' | 'type' | 'data' | 'metadata'>;

export interface AppendResult {
  /** Revision of the stream's last event after the append. */
  nextRevision: bigint;
  /** Global position of the last appended event. */
  position: bigint;
}

export interface AppendOptions {
  expectedRevision: ExpectedRevision;
}

export interface ReadStreamOptions {
  /** Inclusive start revision, or 'start' / 'end'. Default: 'start' forwards, 'end' backwards. */
  from?: bigint | 'start' | 'end';
  direction?: 'forwards' | 'backwards';
  maxCount?: number;
}

/** One stream of a `readStreams`: its events from revision `from` (inclusive) on. */
export interface StreamFrom {
  stream: string;
  from: bigint;
}

export interface ReadAllOptions {
  /** Exclusive: events strictly after this position. Default: from the beginning. */
  fromPosition?: bigint | 'start';
  maxCount?: number;
}

export interface SubscriptionFilter {
  streamPrefixes?: string[];
  eventTypePrefixes?: string[];
  /**
   * A subscription's own test, by the event's place: an event it answers true for is passed over where the adapter
   * reads, before it is decoded (a member's audit feed skips the streams it knows are another scope's).
   */
  skip?: (at: EventPlace) => boolean;
}

/** Where an event is: what a subscription's skip test is given. */
export interface EventPlace {
  stream: string;
  revision: bigint;
  position: bigint;
}

export interface SubscribeOptions {
  /** Exclusive: the subscription yields events strictly after this position. Default: from the beginning. */
  fromPosition?: bigint | 'start';
  filter?: SubscriptionFilter;
  /**
   * Awaited before each page of events the subscription reads from the store (for EventStoreDB, before each
   * PACED_EVENTS events it pulls): how a caller shares the store's reads among its subscriptions (the audit feed
   * takes turns per scope, so one tenant's many listings read no faster than one).
   */
  pace?: () => Promise<void>;
  /**
   * Inclusive: the subscription ends (its iteration is done) once it is past this position, the event there delivered
   * or passed over by the filter: a listing up to the head as it was, not a watch. A position already written (the
   * head when asked); should what is left up to it have gone (a stream summarised), it ends where nothing is left.
   */
  until?: bigint;
}

/** How many events an EventStoreDB subscription pulls per `pace` (the SQLite store's page size). */
export const PACED_EVENTS = 256;

/** Catch-up then live, in global order, with backpressure: the next event is read when the consumer asks. */
export interface Subscription extends AsyncIterable<RecordedEvent> {
  close(): Promise<void>;
}

export interface CompactOptions {
  /** The stream's current revision: the summary goes right after it, or the call fails with WrongExpectedVersion. */
  expectedRevision: bigint;
  /** Streams removed with it (its snapshots): they only derive from the events the compaction removes. */
  dropStreams?: string[];
}

export interface EventStore {
  readonly kind: 'sqlite' | 'eventstoredb';
  append(stream: string, events: EventData[], options: AppendOptions): Promise<AppendResult>;
  /**
   * Appends `summary` at the stream's end and removes every event before it (and `dropStreams`): the summary becomes
   * the stream's first event, at its own revision (revisions are not renumbered). No other event moves, so the
   * global order of what remains is unchanged. A retry with the same summary id at the same revision is a no-op.
   */
  compactStream(stream: string, summary: EventData, options: CompactOptions): Promise<AppendResult>;
  /** Throws `not_found` (BerthError) for an absent stream, like EventStoreDB's StreamNotFound. */
  readStream(stream: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /**
   * Optional: several distinct streams read forwards at once, each from its own revision, in as few reads as the
   * adapter can make (SQLite: one statement per 256 streams; recovery reads 10,000). A stream with no event from
   * there is absent from the map. Callers without it read stream by stream.
   */
  readStreams?(streams: readonly StreamFrom[]): Promise<Map<string, StreamEvent[]>>;
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * Optional: the stream's current revision (-1n when absent), read at once, whoever wrote it (SQLite: one indexed
   * statement). A cached reader asks it before reading the stream again: an unchanged revision means nothing was
   * appended to that stream (a compaction appends its summary too). Without it, callers read.
   */
  revisionNow?(stream: string): bigint;
  subscribeToAll(options?: SubscribeOptions): Subscription;
  /** The stream's current revision, or 'no_stream'. */
  streamRevision(stream: string): Promise<bigint | 'no_stream'>;
  /** The position of the newest event in the store, or -1n when empty. */
  headPosition(): Promise<bigint>;
  close(): Promise<void>;
}

/** The stream was not at the expected revision. `actual` is its current revision or 'no_stream'. */
export class WrongExpectedVersion extends BerthError {
  readonly stream: string;
  readonly expected: ExpectedRevision;
  readonly actual: bigint | 'no_stream';

  constructor(stream: string, expected: ExpectedRevision, actual: bigint | 'no_stream') {
    super('wrong_expected_version', `stream ${stream} is at ${String(actual)}, expected ${String(expected)}`, {
      stream,
      expected: String(expected),
      actual: String(actual),
    });
    this.stream = stream;
    this.expected = expected;
    this.actual = actual;
  }
}

export const isWrongExpectedVersion = (e: unknown): e is WrongExpectedVersion => e instanceof WrongExpectedVersion;

/**
 * A stored event that cannot be decoded; never skipped silently. `at` is its place in the global log, when the
 * adapter knows it: the projections then fail only the read models the event is for and go on past it.
 */
export class CorruptEvent extends BerthError {
  readonly stream: string;
  readonly at?: { position: bigint; type: string };
  constructor(stream: string, revision: bigint, reason: string, at?: { position: bigint; type: string }) {
    super('corrupt_event', `event ${stream}@${revision} cannot be decoded: ${reason}`, {
      stream,
      revision: revision.toString(),
      ...(at ? { position: at.position.toString(), type: at.type } : {}),
    });
    this.stream = stream;
    if (at) this.at = at;
  }
}

export const matchesFilter = (e: { stream: string; type: string }, filter?: SubscriptionFilter): boolean =>
  (!filter?.streamPrefixes?.length || filter.streamPrefixes.some((p) => e.stream.startsWith(p))) &&
  (!filter?.eventTypePrefixes?.length || filter.eventTypePrefixes.some((p) => e.type.startsWith(p)));
