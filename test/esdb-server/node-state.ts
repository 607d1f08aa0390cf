/**
 * What one test node is and holds: its log (shared by the nodes of a cluster), its faults, its role, and what it saw
 * of the client; with the two helpers every Streams call uses.
 */
import type * as SharedPb from '@eventstore/db-client/generated/shared_pb.js';
import type { EventLog } from './event-log.ts';
import type { FaultPlan } from './faults.ts';

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

/** Keeps the `authorization` headers of a call. */
export function record(node: NodeState, values: unknown[]): void {
  for (const v of values) node.authorizations.push(String(v));
}

/** A stream identifier's name (bytes on the wire, UTF-8). */
export const streamName = (id: SharedPb.StreamIdentifier | undefined) => Buffer.from(id?.getStreamName_asU8() ?? []).toString('utf8');
