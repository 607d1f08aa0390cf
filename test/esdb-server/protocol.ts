/**
 * The EventStoreDB gRPC protocol as @eventstore/db-client ships it: its generated service definitions and messages
 * (CommonJS), loaded once so the test server speaks exactly the bytes the client encodes and decodes.
 */
import { createRequire } from 'node:module';
import type * as StreamsGrpc from '@eventstore/db-client/generated/streams_grpc_pb.js';
import type * as StreamsPb from '@eventstore/db-client/generated/streams_pb.js';
import type * as SharedPb from '@eventstore/db-client/generated/shared_pb.js';
import type * as StatusPb from '@eventstore/db-client/generated/status_pb.js';
import type * as FeaturesGrpc from '@eventstore/db-client/generated/serverfeatures_grpc_pb.js';
import type * as FeaturesPb from '@eventstore/db-client/generated/serverfeatures_pb.js';

const require = createRequire(import.meta.url);
const generated = (name: string) => require(`@eventstore/db-client/generated/${name}.js`);

export const streamsGrpc: typeof StreamsGrpc = generated('streams_grpc_pb');
export const streamsPb: typeof StreamsPb = generated('streams_pb');
export const sharedPb: typeof SharedPb = generated('shared_pb');
export const statusPb: typeof StatusPb = generated('status_pb');
export const featuresGrpc: typeof FeaturesGrpc = generated('serverfeatures_grpc_pb');
export const featuresPb: typeof FeaturesPb = generated('serverfeatures_pb');
/** google.protobuf.Any and Empty from the same google-protobuf copy the generated code uses. */
export const anyPb = require('google-protobuf/google/protobuf/any_pb.js') as typeof import('google-protobuf/google/protobuf/any_pb.js');
export const emptyPb = require('google-protobuf/google/protobuf/empty_pb.js') as typeof import('google-protobuf/google/protobuf/empty_pb.js');
