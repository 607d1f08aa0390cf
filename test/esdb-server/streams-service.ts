/**
 * The Streams gRPC service of the test server: Read (stream and $all reads, catch-up and live $all subscriptions with
 * filters), Append, BatchAppend and Delete, answering as KurrentDB's src/KurrentDB.Core/Services/Transport/Grpc/
 * Streams.*.cs do, with the faults of a FaultPlan injected where a real node would fail.
 */
import { status } from '@grpc/grpc-js';
import type * as StreamsGrpc from '@eventstore/db-client/generated/streams_grpc_pb.js';
import { notLeader, trailers } from './errors.ts';
import { record, streamName, type NodeState } from './node-state.ts';
import { streamsPb } from './protocol.ts';
import { append, batchAppend } from './streams-append.ts';
import { endWith, read } from './streams-read.ts';

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

