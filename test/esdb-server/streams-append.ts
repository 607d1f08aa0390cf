/**
 * Append and BatchAppend of the test server's Streams service (Streams.Append.cs, Streams.BatchAppend.cs): proposed
 * events into the log, answers and failures as a node gives them, and the append faults.
 */
import { status, type sendUnaryData, type ServerDuplexStream, type ServerReadableStream } from '@grpc/grpc-js';
import type * as StreamsPb from '@eventstore/db-client/generated/streams_pb.js';
import type * as SharedPb from '@eventstore/db-client/generated/shared_pb.js';
import type { Expected, ProposedEvent } from './event-log.ts';
import { notLeader, timeoutStatus, trailers, unknownStatus, unknownTrailers, wrongExpectedVersionStatus } from './errors.ts';
import { record, streamName, type NodeState } from './node-state.ts';
import { emptyPb, sharedPb, streamsPb } from './protocol.ts';

/** The longest a batch append waits: the default WriteTimeoutMs (src/KurrentDB.Core/Configuration/ClusterVNodeOptions.cs). */
const WRITE_TIMEOUT_MS = 2_000;

/** A proposed message as stored; the id is parsed as a Guid would be, so its case is normalized. */
function proposed(m: StreamsPb.AppendReq.ProposedMessage | StreamsPb.BatchAppendReq.ProposedMessage): ProposedEvent {
  const metadata = m.getMetadataMap();
  return {
    id: uuidOf(m.getId()),
    type: metadata.get('type') ?? '',
    contentType: metadata.get('content-type') ?? 'application/octet-stream',
    data: m.getData_asU8(),
    metadata: m.getCustomMetadata_asU8(),
  };
}

function uuidOf(uuid: SharedPb.UUID | undefined): string {
  if (!uuid) return crypto.randomUUID();
  if (uuid.hasString()) return uuid.getString().toLowerCase();
  const s = uuid.getStructured()!;
  const hex = (v: string) => BigInt.asUintN(64, BigInt(v)).toString(16).padStart(16, '0');
  const h = hex(s.getMostSignificantBits()) + hex(s.getLeastSignificantBits());
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

type ExpectedOptions = { hasAny(): boolean; hasNoStream(): boolean; hasStreamExists(): boolean };
function expectedOf(options: ExpectedOptions, revision: string | undefined): Expected {
  if (options.hasAny()) return 'any';
  if (options.hasNoStream()) return 'no_stream';
  if (options.hasStreamExists()) return 'stream_exists';
  return BigInt(revision ?? '0');
}

/** Streams.Append.cs: the unary append the client falls back to when the node does not offer BatchAppend. */
export async function append(
  node: NodeState,
  call: ServerReadableStream<StreamsPb.AppendReq, StreamsPb.AppendResp>,
  callback: sendUnaryData<StreamsPb.AppendResp>,
): Promise<void> {
  record(node, call.metadata.get('authorization'));
  let options: StreamsPb.AppendReq.Options | undefined;
  const events: ProposedEvent[] = [];
  for await (const req of call as AsyncIterable<StreamsPb.AppendReq>) {
    if (req.hasOptions()) options = req.getOptions();
    else if (req.hasProposedMessage()) events.push(proposed(req.getProposedMessage()!));
  }
  if (!options) return callback(trailers(status.INVALID_ARGUMENT, 'append without options'));
  if (node.role.kind === 'follower') return callback(notLeader(node.role.leader.host, node.role.leader.port));
  const stream = streamName(options.getStreamIdentifier());
  const expected = expectedOf(options, options.hasRevision() ? options.getRevision() : undefined);
  const fault = node.faults.take('append');
  if (fault?.kind === 'hang') return;
  if (fault?.kind === 'unknown') return callback(unknownTrailers('Unexpected OperationResult: Unknown'));
  const outcome = node.log.append(stream, expected, events);
  if (fault?.kind === 'lose-answer') return node.sever();
  if (fault?.kind === 'timeout') return callback(trailers(status.ABORTED, 'Operation timed out: Append timed out.'));
  const resp = new streamsPb.AppendResp();
  if (outcome.kind === 'wrong_expected_version') {
    const wrong = new streamsPb.AppendResp.WrongExpectedVersion();
    if (outcome.actual === 'no_stream') wrong.setCurrentNoStream(new sharedPb.Empty());
    else wrong.setCurrentRevision(outcome.actual.toString());
    if (typeof expected === 'bigint') wrong.setExpectedRevision(expected.toString());
    else if (expected === 'any') wrong.setExpectedAny(new sharedPb.Empty());
    else if (expected === 'stream_exists') wrong.setExpectedStreamExists(new sharedPb.Empty());
    else wrong.setExpectedNoStream(new sharedPb.Empty());
    resp.setWrongExpectedVersion(wrong);
  } else {
    const success = new streamsPb.AppendResp.Success();
    success.setCurrentRevision(outcome.nextRevision.toString());
    const position = new streamsPb.AppendResp.Position();
    position.setCommitPosition(outcome.position.toString());
    position.setPreparePosition(outcome.position.toString());
    success.setPosition(position);
    resp.setSuccess(success);
  }
  callback(null, resp);
}

/**
 * Streams.BatchAppend.cs: one long-lived duplex call; each request carries a correlation id, options in its first
 * part, and is applied when its final part arrives. Failures are answered per request in a google.rpc.Status, except
 * NotLeader, which ends the whole call with the leader's address in trailers.
 */
export function batchAppend(node: NodeState, call: ServerDuplexStream<StreamsPb.BatchAppendReq, StreamsPb.BatchAppendResp>): void {
  record(node, call.metadata.get('authorization'));
  const pending = new Map<string, { options: StreamsPb.BatchAppendReq.Options; events: ProposedEvent[] }>();
  call.on('error', () => undefined); // a client that goes away mid-call
  call.on('end', () => call.end());
  call.on('data', (req: StreamsPb.BatchAppendReq) => {
    if (call.destroyed) return;
    const key = uuidOf(req.getCorrelationId());
    const options = req.getOptions();
    const entry = pending.get(key) ?? (options ? { options, events: [] } : undefined);
    if (!entry) return void call.emit('error', trailers(status.INVALID_ARGUMENT, 'batch append without options'));
    entry.events.push(...req.getProposedMessagesList().map(proposed));
    pending.set(key, entry);
    if (!req.getIsFinal()) return;
    pending.delete(key);
    if (node.role.kind === 'follower') return void call.emit('error', notLeader(node.role.leader.host, node.role.leader.port));
    const resp = new streamsPb.BatchAppendResp();
    resp.setCorrelationId(req.getCorrelationId());
    resp.setStreamIdentifier(entry.options.getStreamIdentifier());
    const expected = expectedOf(entry.options, entry.options.hasStreamPosition() ? entry.options.getStreamPosition() : undefined);
    if (typeof expected === 'bigint') resp.setStreamPosition(expected.toString());
    else if (expected === 'any') resp.setAny(new emptyPb.Empty());
    else if (expected === 'no_stream') resp.setNoStream(new emptyPb.Empty());
    else resp.setStreamExists(new emptyPb.Empty());
    const fault = node.faults.take('append');
    if (fault?.kind === 'hang') {
      // The write never completes: the node answers Timeout when the request's own deadline passes (its
      // GetRequestedTimeout, at most the server's write timeout), unless the client has gone by then.
      resp.setError(timeoutStatus());
      const deadline = entry.options.getDeadline()?.toDate().getTime() ?? Date.now() + WRITE_TIMEOUT_MS;
      const wait = Math.min(Math.max(0, deadline - Date.now()), WRITE_TIMEOUT_MS);
      return void setTimeout(() => call.writable && !call.destroyed && call.write(resp), wait).unref();
    }
    if (fault?.kind === 'unknown') {
      resp.setError(unknownStatus());
      return void call.write(resp);
    }
    const stream = streamName(entry.options.getStreamIdentifier());
    const outcome = node.log.append(stream, expected, entry.events);
    if (fault?.kind === 'lose-answer') return node.sever();
    if (fault?.kind === 'timeout') resp.setError(timeoutStatus());
    else if (outcome.kind === 'wrong_expected_version') resp.setError(wrongExpectedVersionStatus(expected, outcome.actual));
    else {
      const success = new streamsPb.BatchAppendResp.Success();
      success.setCurrentRevision(outcome.nextRevision.toString());
      const position = new sharedPb.AllStreamPosition();
      position.setCommitPosition(outcome.position.toString());
      position.setPreparePosition(outcome.position.toString());
      success.setPosition(position);
      resp.setSuccess(success);
    }
    call.write(resp);
  });
}

