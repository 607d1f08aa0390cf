/**
 * Read of the test server's Streams service: stream and $all reads both ways, and catch-up then live $all
 * subscriptions with server-side filters (Streams.Read.cs and the Enumerators under src/KurrentDB.Core/Services/
 * Transport/Enumerators/), with backpressure and the read faults.
 */
import { once } from 'node:events';
import { status, type ServerWritableStream } from '@grpc/grpc-js';
import type * as StreamsPb from '@eventstore/db-client/generated/streams_pb.js';
import type { StoredEvent } from './event-log.ts';
import { notLeader, trailers, unknownTrailers } from './errors.ts';
import { record, streamName, type NodeState } from './node-state.ts';
import { sharedPb, streamsPb } from './protocol.ts';

type ReadReq = StreamsPb.ReadReq;
type ReadResp = StreamsPb.ReadResp;

/** Filtered subscriptions send a checkpoint after this many events scanned, times the client's multiplier (the
 * server's default max search window is 32). */
const SEARCH_WINDOW = 32;

/** Ends a read that failed inside the server with INTERNAL, unless the client has gone. */
export function endWith(call: ServerWritableStream<ReadReq, ReadResp>, err: unknown): void {
  if (call.cancelled || call.destroyed) return;
  call.emit('error', trailers(status.INTERNAL, String(err)));
}

/** Streams.Read.cs: a follower refuses reads that require the leader (the `requires-leader` header). */
function refusedByFollower(node: NodeState, metadata: { get(key: string): unknown[] }) {
  if (node.role.kind !== 'follower') return undefined;
  if (String(metadata.get('requires-leader')[0] ?? '') !== 'true') return undefined;
  return notLeader(node.role.leader.host, node.role.leader.port);
}

export async function read(node: NodeState, call: ServerWritableStream<ReadReq, ReadResp>): Promise<void> {
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
