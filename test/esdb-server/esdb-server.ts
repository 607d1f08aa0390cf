/**
 * A protocol-level EventStoreDB node for tests (not shipped): the Streams and ServerFeatures gRPC services over an
 * in-memory log, behind a TCP front that counts and can cut client connections, with optional TLS. Nodes may share
 * one log to play a cluster's leader and followers.
 */
import { createServer, Socket, type Server as NetServer } from 'node:net';
import { once } from 'node:events';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import type * as FeaturesGrpc from '@eventstore/db-client/generated/serverfeatures_grpc_pb.js';
import { EventLog } from './event-log.ts';
import { FaultPlan } from './faults.ts';
import { featuresGrpc, featuresPb, streamsGrpc } from './protocol.ts';
import type { NodeRole, NodeState } from './node-state.ts';
import { streamsService } from './streams-service.ts';

export interface EsdbServerOptions {
  /** The public port (0: any free one). */
  port?: number;
  /** PEM certificate and key: the node serves TLS (clients need the certificate as their CA, tlsCAFile). */
  tls?: { cert: Buffer; key: Buffer };
  /** Shared with other nodes to form a cluster; a fresh log otherwise. */
  log?: EventLog;
  role?: NodeRole;
  /** Offer BatchAppend in the server features (the client then appends through it), as 21.10 and later do. */
  batchAppend?: boolean;
}

export interface EsdbServer {
  host: string;
  port: number;
  /** A Berth store URL for this node (TLS: with tlsCAFile naming `caFile`). */
  url(caFile?: string): string;
  log: EventLog;
  faults: FaultPlan;
  node: NodeState;
  /** Client connections open now. */
  readonly connections: number;
  /** Connections accepted since the start. */
  readonly accepted: number;
  close(): Promise<void>;
}

/** The version reported in the server features: the newest protocol the client knows. */
const SERVER_VERSION = '24.10.0';

export async function startEsdbServer(options: EsdbServerOptions = {}): Promise<EsdbServer> {
  const log = options.log ?? new EventLog();
  const sockets = new Set<Socket>();
  const clients = new Set<Socket>();
  const node: NodeState = {
    log,
    faults: new FaultPlan(),
    role: options.role ?? { kind: 'leader' },
    sever: () => {
      for (const s of sockets) s.destroy();
    },
    authorizations: [],
  };
  const grpc = new Server();
  const features: FeaturesGrpc.IServerFeaturesServer = {
    getSupportedMethods: (_call, callback) => callback(null, supportedMethods(options.batchAppend ?? true)),
  };
  grpc.addService(featuresGrpc.ServerFeaturesService, features);
  grpc.addService(streamsGrpc.StreamsService, streamsService(node));
  const credentials = options.tls
    ? ServerCredentials.createSsl(null, [{ cert_chain: options.tls.cert, private_key: options.tls.key }])
    : ServerCredentials.createInsecure();
  const innerPort = await new Promise<number>((resolve, reject) =>
    grpc.bindAsync('127.0.0.1:0', credentials, (err, port) => (err ? reject(err) : resolve(port))),
  );
  let accepted = 0;
  const front: NetServer = createServer((client) => {
    accepted++;
    const upstream = new Socket();
    sockets.add(client);
    sockets.add(upstream);
    clients.add(client);
    const drop = () => {
      clients.delete(client);
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    upstream.connect(innerPort, '127.0.0.1');
    client.pipe(upstream).pipe(client);
  });
  front.listen(options.port ?? 0, '127.0.0.1');
  await once(front, 'listening');
  const port = (front.address() as { port: number }).port;
  return {
    host: 'localhost',
    port,
    url: (caFile) => (options.tls ? `esdb://localhost:${port}?tls=true&tlsCAFile=${caFile}` : `esdb://localhost:${port}?tls=false`),
    log,
    faults: node.faults,
    node,
    get connections() {
      return clients.size;
    },
    get accepted() {
      return accepted;
    },
    close: async () => {
      front.close();
      node.sever();
      await new Promise<void>((resolve) => grpc.tryShutdown(() => resolve()));
      grpc.forceShutdown();
    },
  };
}

/** ServerFeatures.cs: the methods this node serves, by service and method name (the client lowercases the path). */
function supportedMethods(batchAppend: boolean) {
  const methods: [string, string, string[]][] = [
    ['event_store.client.streams.Streams', 'Read', ['position', 'events', 'all']],
    ['event_store.client.streams.Streams', 'Append', []],
    ['event_store.client.streams.Streams', 'Delete', []],
    ...(batchAppend ? [['event_store.client.streams.Streams', 'BatchAppend', []] as [string, string, string[]]] : []),
  ];
  const supported = new featuresPb.SupportedMethods();
  supported.setEventStoreServerVersion(SERVER_VERSION);
  supported.setMethodsList(
    methods.map(([service, method, features]) => {
      const m = new featuresPb.SupportedMethod();
      m.setServiceName(service);
      m.setMethodName(method);
      m.setFeaturesList(features);
      return m;
    }),
  );
  return supported;
}
