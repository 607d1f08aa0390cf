/**
 * Translation between the event store port and @eventstore/db-client 6: connection URLs, expected revisions,
 * positions, recorded events and the client's errors. Pure functions; the adapter and its subscription use them.
 */
import {
  ANY,
  NO_STREAM,
  STREAM_EXISTS,
  AccessDeniedError,
  CancelledError,
  DeadlineExceededError,
  InvalidArgumentError,
  MaxAppendSizeExceededError,
  NotLeaderError,
  StreamDeletedError,
  StreamNotFoundError,
  TimeoutError,
  UnavailableError,
  WrongExpectedVersionError,
  convertToCommandError,
  eventTypeFilter,
  excludeSystemEvents,
  streamNameFilter,
  type AppendExpectedRevision,
  type Filter,
  type Position,
  type RecordedEvent as ClientRecordedEvent,
} from '@eventstore/db-client';
import { BerthError } from '../../schemas/errors.ts';
import {
  CorruptEvent,
  WrongExpectedVersion,
  type ExpectedRevision,
  type RecordedEvent,
  type SubscriptionFilter,
} from './event-store.ts';

/**
 * The client's connection string for a Berth store URL: `esdb://` and `esdb+discover://` pass through,
 * `eventstoredb://` and `eventstoredb+discover://` (Berth's `--store` spelling) become their `esdb` twins.
 * Query options (`tls=false`, `defaultDeadline=…`, credentials) are the client's own and are kept as written.
 */
export function toConnectionString(url: string): string {
  const match = /^(esdb|eventstoredb)(\+discover)?:\/\/(.+)$/is.exec(url.trim());
  if (!match) {
    const shown = redactCredentials(url);
    throw new BerthError('invalid_request', `"${shown}" is not an EventStoreDB URL (esdb://host:port?tls=false)`, {
      url: shown,
    });
  }
  return `esdb${(match[2] ?? '').toLowerCase()}://${match[3]}`;
}

/** The URL with its `user:password@` part masked, for messages and logs. */
export const redactCredentials = (url: string): string => url.replace(/\/\/[^/@]*@/, '//***@');

/**
 * The server-side part of a port filter. A subscription takes one server filter, on stream names or on event types:
 * stream prefixes when given (the narrower, as Berth's streams are named by category), else event-type prefixes, else
 * the client's excludeSystemEvents. Whatever the server does not apply is applied by the subscription itself.
 */
export function toServerFilter(filter: SubscriptionFilter | undefined): Filter {
  if (filter?.streamPrefixes?.length) return streamNameFilter({ prefixes: filter.streamPrefixes });
  if (filter?.eventTypePrefixes?.length) return eventTypeFilter({ prefixes: filter.eventTypePrefixes });
  return excludeSystemEvents();
}

export function toClientExpectedRevision(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'no_stream':
      return NO_STREAM;
    case 'stream_exists':
      return STREAM_EXISTS;
    case 'any':
      return ANY;
    default:
      if (typeof expected !== 'bigint' || expected < 0n) {
        throw new BerthError('invalid_request', `expected revision ${String(expected)} is not a revision`, {
          expected: String(expected),
        });
      }
      return expected;
  }
}

/**
 * Positions. EventStoreDB positions are {commit, prepare} pairs in the transaction file; the port exposes one bigint.
 * Every event Berth can write (the gRPC API has no explicit transactions) is a committed prepare: the server's
 * AllReader records it with commit position = prepare position = its own log position (`new CommitEventRecord(
 * eventRecord, eventRecord.LogPosition)`), so commit positions are unique and strictly increasing per event, and
 * {commit: p, prepare: p} is the exact position to resume from. Maintainers confirm that prepare only differs from
 * commit for explicit transactions (KurrentDB issue #3989, PR #4975), which only the legacy TCP API could write: a
 * database holding some is not supported. An append's result carries the position of its last event (the storage
 * chaser acknowledges the prepare flagged TransactionEnd, and `WriteEventsCompleted` reports that log position as
 * both commit and prepare).
 */
export const toClientPosition = (position: bigint): Position => ({ commit: position, prepare: position });

/** Servers older than 22.6 send no position on stream reads (the field is absent or 2^64-1). */
const NO_POSITION = 2n ** 63n;

export function fromClientPosition(position: Position | undefined): bigint | undefined {
  return position === undefined || position.commit < 0n || position.commit >= NO_POSITION ? undefined : position.commit;
}

/** The port position of a recorded event; stream reads carry one from EventStoreDB 22.6 on. */
export function positionOf(e: ClientRecordedEvent): bigint {
  const position = fromClientPosition(e.position);
  if (position === undefined) {
    const where = `${e.streamId}@${e.revision}`;
    throw new BerthError('internal', `EventStoreDB sent no position for ${where}: it must be 22.6 or later`, {
      stream: e.streamId,
      revision: e.revision.toString(),
    });
  }
  return position;
}

/** System streams and events (`$`-prefixed) are EventStoreDB's own: never part of readAll or a subscription. */
export const isSystemEvent = (e: { streamId: string; type: string }): boolean =>
  e.streamId.startsWith('$') || e.type.startsWith('$');

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The port's recorded event. JSON content is parsed by the client; a binary payload is accepted when its bytes are
 * JSON, otherwise the event is corrupt. Limitation: the 6.x client returns a JSON-typed payload that fails to parse
 * as its raw text (convertGrpcEvent's safeParseJSON), which cannot be told from a JSON string value.
 */
export function toRecordedEvent(e: ClientRecordedEvent): RecordedEvent {
  const position = positionOf(e);
  // Where it is in the log, so the projections fail only the read models it is for and go on past it.
  const at = { position, type: e.type };
  const data = e.isJson ? e.data : decodeJson(e.streamId, e.revision, 'data', e.data, at);
  const metadata = e.metadata === undefined ? {} : decodeMetadata(e.streamId, e.revision, e.metadata, at);
  return {
    id: e.id,
    stream: e.streamId,
    revision: e.revision,
    position,
    type: e.type,
    data,
    metadata,
    createdAt: e.created.toISOString(),
  };
}

type LogPlace = { position: bigint; type: string };

function decodeJson(stream: string, revision: bigint, what: string, bytes: Uint8Array, at: LogPlace): unknown {
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch (err) {
    throw new CorruptEvent(stream, revision, `${what} is not JSON (${(err as Error).message})`, at);
  }
}

function decodeMetadata(stream: string, revision: bigint, raw: unknown, at: LogPlace): Record<string, unknown> {
  // The client parses JSON metadata and hands back the bytes when they are not JSON.
  const metadata = raw instanceof Uint8Array ? decodeJson(stream, revision, 'metadata', raw, at) : raw;
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw new CorruptEvent(stream, revision, 'metadata is not a JSON object', at);
  }
  return metadata as Record<string, unknown>;
}

/**
 * True when the call may not have reached the server or its answer was lost: safe to retry an idempotent call.
 * UnknownError is not among them: the server answered, with a result it could not map (Status.Unknown), or the
 * client met a status it does not know; repeating the call would meet the same.
 */
export function isTransient(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const e = convertToCommandError(err);
  return (
    e instanceof UnavailableError ||
    e instanceof DeadlineExceededError ||
    e instanceof TimeoutError ||
    e instanceof CancelledError ||
    e instanceof NotLeaderError ||
    // Raised by the client's gossip discovery (esdb+discover://) after its own attempts.
    /^Failed to discover/.test(e.message)
  );
}

export interface ErrorContext {
  stream?: string;
  expected?: ExpectedRevision;
}

/** The Berth error for a client failure. `context` names what the call was about, for the error's detail. */
export function toBerthError(err: unknown, context: ErrorContext = {}): BerthError {
  if (err instanceof BerthError) return err;
  if (!(err instanceof Error)) return new BerthError('internal', `EventStoreDB call failed: ${String(err)}`);
  const e = convertToCommandError(err);
  const stream = context.stream;
  if (e instanceof WrongExpectedVersionError) {
    // Over the legacy append path the server's "no stream" may arrive as a negative revision.
    const actual = typeof e.actualVersion === 'bigint' && e.actualVersion >= 0n ? e.actualVersion : 'no_stream';
    const expected = context.expected ?? fromClientExpectedRevision(e.expectedVersion);
    return new WrongExpectedVersion(stream ?? e.streamName, expected, actual);
  }
  if (e instanceof StreamNotFoundError) {
    const name = stream ?? e.streamName;
    return new BerthError('not_found', `stream ${name} does not exist`, { stream: name });
  }
  if (e instanceof StreamDeletedError) {
    const name = stream ?? e.streamName;
    return new BerthError('not_found', `stream ${name} is deleted`, { stream: name, deleted: true });
  }
  if (e instanceof InvalidArgumentError || e instanceof MaxAppendSizeExceededError) {
    const message = `EventStoreDB refused the request: ${e.message}`;
    return new BerthError('invalid_request', message, { stream }, { cause: e });
  }
  if (e instanceof AccessDeniedError) {
    const message = 'EventStoreDB denied access: check the credentials in the store URL';
    return new BerthError('internal', message, { stream }, { cause: e });
  }
  if (isTransient(e)) {
    return new BerthError('unavailable', `EventStoreDB cannot be reached: ${e.message}`, { stream }, { cause: e });
  }
  return new BerthError('internal', `EventStoreDB call failed: ${e.message}`, { stream }, { cause: e });
}

/** The legacy append path reports ExpectedVersion's numeric constants (NoStream -1, Any -2, StreamExists -4). */
function fromClientExpectedRevision(expected: AppendExpectedRevision): ExpectedRevision {
  if (typeof expected !== 'bigint' || expected >= 0n) return expected;
  if (expected === -4n) return 'stream_exists';
  return expected === -1n ? 'no_stream' : 'any';
}
