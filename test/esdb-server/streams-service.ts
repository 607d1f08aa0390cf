/**
 * The Streams gRPC service of the test server: Read (stream and $all reads, catch-up and live $all subscriptions with
 * filters), Append, BatchAppend and Delete, answering as KurrentDB's src/KurrentDB.Core/Services/Transport/Grpc/
 * Streams.*.cs do, with the faults of a FaultPlan injected where a real node would fail.
 */
import { once } from 'node:events';
import { status, type sendUnaryData, type ServerDuplexStream, type ServerReadableStream, type ServerWritableStream } from '@grpc/grpc-js';
import type * as StreamsGrpc from '@eventstore/db-client/generated/streams_grpc_pb.js';
import type * as StreamsPb from '@eventstore/db-client/generated/streams_pb.js';
import type * as SharedPb from '@eventstore/db-client/generated/shared_pb.js';
import type { EventLog, Expected, ProposedEvent, StoredEvent } from './event-log.ts';
import {
  notLeader,
  timeoutStatus,
  trailers,
  unknownStatus,
  unknownTrailers,
  wrongExpectedVersionStatus,
} from './errors.ts';
import type { FaultPlan } from './faults.ts';
import { emptyPb, sharedPb, streamsPb } from './protocol.ts';

type ReadReq = StreamsPb.ReadReq;
type ReadResp = StreamsPb.ReadResp;

/** What a node is in its cluster: the leader, or a follower that names the leader and may lag behind it (its reads
 * then stop at `replicatedUpTo`; its subscriptions do not lag). */
export type NodeRole = { kind: 'leader' } | { kind: 'follower'; leader: { host: string; port: number }; replicatedUpTo?: bigint };

export interface NodeState {
  log: EventLog;
  faults: FaultPlan;
  role: NodeRole;
  /** Cuts every client connection (the proxy in front of the gRPC server). */
  sever(): void;
  /** `authorization` headers received, for tests of what credentials the client sends. */
  authorizations: string[];
}

/** The longest a batch append waits: the default WriteTimeoutMs (src/KurrentDB.Core/Configuration/ClusterVNodeOptions.cs). */
const WRITE_TIMEOUT_MS = 2_000;

/** Filtered subscriptions send a checkpoint after this many events scanned, times the client's multiplier (the
 * server's default max search window is 32). */
const SEARCH_WINDOW = 32;

export function streamsService(node: NodeState): StreamsGrpc.IStreamsServer {
  return {
    read: (call) => void read(node, call).catch((err) => endWith(call, err)),
    append: (call, callback) => void append(node, call, callback),
    batchAppend: (call) => batchAppend(node, call),
    delete: (call, callback) => {
      record(node, call.metadata.get('authorization'));
      if (node.role.kind === 'follower') return callback(notLeader(node.role.leader.host, node.role.leader.port) as never);
      const name = streamName(call.request.getOptions()?.getStreamIdentifier());
      const position = node.log.softDelete(name);
      const resp = new streamsPb.DeleteResp();
      const p = new streamsPb.DeleteResp.Position();
      p.setCommitPosition(position.toString());
      p.setPreparePosition(position.toString());
      resp.setPosition(p);
      callback(null, resp);
    },
    tombstone: (_call, callback) => callback(trailers(status.UNIMPLEMENTED, 'tombstone is not served by the test server') as never),
  };
}

function record(node: NodeState, values: unknown[]): void {
  for (const v of values) node.authorizations.push(String(v));
}

const streamName = (id: SharedPb.StreamIdentifier | undefined) => Buffer.from(id?.getStreamName_asU8() ?? []).toString('utf8');

function endWith(call: ServerWritableStream<ReadReq, ReadResp>, err: unknown): void {
  if (call.cancelled || call.destroyed) return;
  call.emit('error', trailers(status.INTERNAL, String(err)));
}

/** Streams.Read.cs: a follower refuses reads that require the leader (the `requires-leader` header). */
function refusedByFollower(node: NodeState, metadata: { get(key: string): unknown[] }) {
  if (node.role.kind !== 'follower') return undefined;
  if (String(metadata.get('requires-leader')[0] ?? '') !== 'true') return undefined;
  return notLeader(node.role.leader.host, node.role.leader.port);
}

async function read(node: NodeState, call: ServerWritableStream<ReadReq, ReadResp>): Promise<void> {
  record(node, call.metadata.get('authorization'));
  const options = call.request.getOptions()!;
  const refused = refusedByFollower(node, call.metadata);
  if (refused) return void call.emit('error', refused);
  const fault = node.faults.take(options.hasSubscription() ? 'subscribe' : 'read');
  if (fault?.kind === 'hang') return;
  if (fault?.kind === 'unknown') return void call.emit('error', unknownTrailers('Unexpected ReadStreamResult: Error'));
  const dropAfter = fault?.kind === 'drop' ? fault.events : Infinity;
  const writer = new EventWriter(node, call, dropAfter);
  if (options.hasSubscription()) return subscribeToAll(node, options, writer);
  const count = Number(options.getCount());
  const backwards = options.getReadDirection() === streamsPb.ReadReq.Options.ReadDirection.BACKWARDS;
  const upTo = node.role.kind === 'follower' ? node.role.replicatedUpTo : undefined;
  let events: StoredEvent[];
  if (options.hasStream()) {
    const stream = options.getStream()!;
    const name = streamName(stream.getStreamIdentifier());
    const all = node.log.streamEvents(name)?.filter((e) => upTo === undefined || e.position <= upTo);
    if (!all?.length) {
      const resp = new streamsPb.ReadResp();
      const notFound = new streamsPb.ReadResp.StreamNotFound();
      notFound.setStreamIdentifier(stream.getStreamIdentifier());
      resp.setStreamNotFound(notFound);
      call.write(resp);
      return void call.end();
    }
    const from = stream.hasRevision() ? BigInt(stream.getRevision()) : undefined;
    events = backwards
      ? all.filter((e) => from === undefined || stream.hasEnd() || e.revision <= from).reverse()
      : all.filter((e) => from === undefined || e.revision >= from);
    events = events.slice(0, count);
  } else {
    const all = options.getAll()!;
    const from = all.hasPosition() ? BigInt(all.getPosition()!.getCommitPosition()) : all.hasEnd() ? 'end' : 'start';
    events = node.log.readAll(from, backwards ? 'backwards' : 'forwards', count, upTo);
  }
  for (const e of events) if (!(await writer.event(e))) return;
  call.end();
}

/**
 * Enumerator.AllSubscription.cs: confirmation, catch-up strictly after the checkpoint, CaughtUp, then live events as
 * they are written; with a filter (Enumerator.AllSubscriptionFiltered.cs) only matching events, and a checkpoint
 * every checkpointIntervalMultiplier × window events scanned.
 */
async function subscribeToAll(node: NodeState, options: StreamsPb.ReadReq.Options, writer: EventWriter): Promise<void> {
  const call = writer.call;
  const all = options.getAll()!;
  let index: number;
  if (all.hasPosition()) {
    const from = BigInt(all.getPosition()!.getCommitPosition());
    index = node.log.indexAtOrAfter(from);
    if (node.log.eventAt(index)?.position === from) index++;
  } else index = all.hasEnd() ? node.log.indexAtOrAfter(node.log.headPosition + 1n) : 0;
  const matches = filterOf(options);
  const checkpointEvery = options.hasFilter() ? SEARCH_WINDOW * Math.max(1, options.getFilter()!.getCheckpointintervalmultiplier()) : 0;
  let scanned = 0;
  let wake: (() => void) | undefined;
  const stopListening = node.log.onWrite(() => wake?.());
  call.on('cancelled', () => wake?.());
  call.on('close', () => wake?.());
  try {
    const confirmation = new streamsPb.ReadResp();
    const confirmed = new streamsPb.ReadResp.SubscriptionConfirmation();
    confirmed.setSubscriptionId(crypto.randomUUID());
    confirmation.setConfirmation(confirmed);
    if (!(await writer.write(confirmation))) return;
    let caughtUp = false;
    for (;;) {
      if (call.cancelled || call.destroyed) return;
      const e = node.log.eventAt(index);
      if (e === undefined) {
        if (!caughtUp) {
          caughtUp = true;
          const resp = new streamsPb.ReadResp();
          resp.setCaughtUp(new streamsPb.ReadResp.CaughtUp());
          if (!(await writer.write(resp))) return;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      index++;
      scanned++;
      if (matches(e) && !(await writer.event(e))) return;
      if (checkpointEvery > 0 && scanned % checkpointEvery === 0 && !(await writer.write(checkpointAt(e.position)))) return;
    }
  } finally {
    stopListening();
  }
}

function checkpointAt(position: bigint): ReadResp {
  const resp = new streamsPb.ReadResp();
  const checkpoint = new streamsPb.ReadResp.Checkpoint();
  checkpoint.setCommitPosition(position.toString());
  checkpoint.setPreparePosition(position.toString());
  resp.setCheckpoint(checkpoint);
  return resp;
}

/** The server-side filter of a subscription: on stream names or event types, by prefixes or a regex. */
function filterOf(options: StreamsPb.ReadReq.Options): (e: StoredEvent) => boolean {
  if (!options.hasFilter()) return () => true;
  const filter = options.getFilter()!;
  const onStream = filter.hasStreamIdentifier();
  const expression = onStream ? filter.getStreamIdentifier()! : filter.getEventType()!;
  const prefixes = expression.getPrefixList();
  const regex = expression.getRegex() ? new RegExp(expression.getRegex()) : undefined;
  return (e) => {
    const subject = onStream ? e.stream : e.type;
    return prefixes.length > 0 ? prefixes.some((p) => subject.startsWith(p)) : regex ? regex.test(subject) : true;
  };
}

/** Writes read answers with backpressure, and cuts the connections after `dropAfter` events when told to. */
class EventWriter {
  private sent = 0;
  constructor(
    private readonly node: NodeState,
    readonly call: ServerWritableStream<ReadReq, ReadResp>,
    private readonly dropAfter: number,
  ) {}

  async event(e: StoredEvent): Promise<boolean> {
    if (this.sent >= this.dropAfter) {
      this.node.sever();
      return false;
    }
    this.sent++;
    return this.write(readEvent(e));
  }

  async write(resp: ReadResp): Promise<boolean> {
    if (this.call.cancelled || this.call.destroyed) return false;
    if (!this.call.write(resp)) {
      await Promise.race([once(this.call, 'drain'), once(this.call, 'close')]);
    }
    return !(this.call.cancelled || this.call.destroyed);
  }
}

function readEvent(e: StoredEvent): ReadResp {
  const recorded = new streamsPb.ReadResp.ReadEvent.RecordedEvent();
  const id = new sharedPb.UUID();
  id.setString(e.id);
  recorded.setId(id);
  const stream = new sharedPb.StreamIdentifier();
  stream.setStreamName(Buffer.from(e.stream));
  recorded.setStreamIdentifier(stream);
  recorded.setStreamRevision(e.revision.toString());
  recorded.setCommitPosition(e.position.toString());
  recorded.setPreparePosition(e.position.toString());
  recorded.getMetadataMap().set('type', e.type).set('content-type', e.contentType).set('created', e.created.toString());
  recorded.setData(e.data);
  recorded.setCustomMetadata(e.metadata);
  const event = new streamsPb.ReadResp.ReadEvent();
  event.setEvent(recorded);
  event.setCommitPosition(e.position.toString());
  const resp = new streamsPb.ReadResp();
  resp.setEvent(event);
  return resp;
}

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
async function append(
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
function batchAppend(node: NodeState, call: ServerDuplexStream<StreamsPb.BatchAppendReq, StreamsPb.BatchAppendResp>): void {
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

