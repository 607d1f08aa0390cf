/**
 * The two ways an EventStoreDB node reports a failure, built as KurrentDB builds them: gRPC trailers with an
 * `exception` key and its metadata (src/KurrentDB.Core/Services/Transport/Grpc/RpcExceptions.cs), and, inside batch
 * append answers, a google.rpc.Status whose details pack a typed message (…/Transport/Grpc/Status.cs).
 */
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import type { Expected } from './event-log.ts';
import { anyPb, emptyPb, sharedPb, statusPb } from './protocol.ts';

/** A status with trailers, as a handler emits it on a call ('error' on a stream, the callback's error on a unary). */
export function trailers(code: status, details: string, entries: Record<string, string> = {}): Partial<ServiceError> {
  const metadata = new Metadata();
  for (const [key, value] of Object.entries(entries)) metadata.set(key, value);
  return { code, details, metadata };
}

/** RpcExceptions.LeaderInfo: a follower refuses a call that needs the leader and names it. */
export const notLeader = (host: string, port: number) =>
  trailers(status.NOT_FOUND, 'Leader info available', {
    exception: 'not-leader',
    'leader-endpoint-host': host,
    'leader-endpoint-port': String(port),
  });

/** RpcExceptions.UnknownError: an unexpected result, with no exception key. */
export const unknownTrailers = (message: string) => trailers(status.UNKNOWN, message);

/** google.rpc codes used by Status.cs (they are the gRPC status codes). */
function rpcStatus(code: status, message: string, type: string, detail: { serializeBinary(): Uint8Array }) {
  const s = new statusPb.Status();
  s.setCode(code as number);
  s.setMessage(message);
  const any = new anyPb.Any();
  any.pack(detail.serializeBinary(), type);
  s.setDetails(any);
  return s;
}

/** Status.WrongExpectedVersion: AlreadyExists, with the current and the expected revision. */
export function wrongExpectedVersionStatus(expected: Expected, actual: bigint | 'no_stream') {
  const detail = new sharedPb.WrongExpectedVersion();
  if (actual === 'no_stream') detail.setCurrentNoStream(new emptyPb.Empty());
  else detail.setCurrentStreamRevision(actual.toString());
  if (typeof expected === 'bigint') detail.setExpectedStreamPosition(expected.toString());
  else if (expected === 'any') detail.setExpectedAny(new emptyPb.Empty());
  else if (expected === 'stream_exists') detail.setExpectedStreamExists(new emptyPb.Empty());
  else detail.setExpectedNoStream(new emptyPb.Empty());
  return rpcStatus(status.ALREADY_EXISTS, 'WrongExpectedVersion', 'event_store.client.WrongExpectedVersion', detail);
}

/** Status.Timeout: the write did not complete within its deadline (its outcome is unknown). */
export const timeoutStatus = () =>
  rpcStatus(status.DEADLINE_EXCEEDED, 'Timeout', 'event_store.client.Timeout', new sharedPb.Timeout());

/** Status.Unknown: an operation result the gRPC layer has no mapping for. */
export const unknownStatus = () =>
  rpcStatus(status.UNKNOWN, 'Unknown error', 'event_store.client.Unknown', new sharedPb.Unknown());
