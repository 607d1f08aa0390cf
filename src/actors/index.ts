/** The actor layer's public surface (DESIGN §4). Everything else under src/actors is internal. */
export { defineActor, RUNTIME_RECOVERED } from './actor-type.ts';
export type { ActorType, DomainEvent, EffectContext, EffectHandler, Rejection, RuntimeIdentity } from './actor-type.ts';
export { ActorRuntime } from './actor-runtime.ts';
export type {
  ActorLogger,
  ActorRuntimeOptions,
  ActorView,
  RecoveryReport,
  SendOptions,
  SendResult,
} from './actor-runtime.ts';
export { decodeRecorded, runtimeRecoveredSchema } from './event-codec.ts';
export { RUNTIME_STARTED, runtimeStreamOf } from './epoch-fence.ts';
export { replayStream, type ReplayedEvent } from './replay.ts';
export { SNAPSHOT_PREFIX, snapshotStreamOf } from './snapshot-stream.ts';
export { actorSpec, restartCheck, type SpecExpectation, type SpecOutcome } from './testing.ts';
