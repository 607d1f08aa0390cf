/**
 * Berth's public surface for embedders (`import … from 'berth'`): start a runtime in-process and call its API, the
 * event store port and adapters, the actor runtime with its machine test kit, and the machines themselves. The HTTP
 * client is `berth/client`. Everything else is internal. (TypeScript sources: load them through tsx or a bundler.)
 */
export { startBerth, defaultProviders, type Berth, type StartBerthOptions } from './runtime/berth.ts';
export type * from './runtime/runtime-api.ts';
export { defaultRolePolicy, type RolePolicy, type ProfileCeilings, type ScopeQuotas } from './runtime/role-policy.ts';
export { BerthError, isBerthError, errorCodes, type ErrorCode } from '../schemas/errors.ts';
export { profileSchema, type Profile } from '../schemas/profile.ts';

export { WrongExpectedVersion, isWrongExpectedVersion, CorruptEvent } from './store/event-store.ts';
export type { EventStore, EventData, RecordedEvent, ExpectedRevision, Subscription } from './store/event-store.ts';
export { SqliteEventStore } from './store/sqlite-event-store.ts';
export { openStore } from './store/open-store.ts';

export { ActorRuntime, defineActor, replayStream, actorSpec, restartCheck, RUNTIME_RECOVERED } from './actors/index.ts';
export type { ActorType, DomainEvent, EffectContext, EffectHandler, SpecExpectation, SpecOutcome } from './actors/index.ts';

export { environmentMachine } from './machines/environment.machine.ts';
export { allocationMachine } from './machines/allocation.machine.ts';
export { executionMachine, executionStatus } from './machines/execution.machine.ts';
export { sessionMachine } from './machines/session.machine.ts';

export type { Provider, Executor, ExecSpec, Receipt, AllocationReport } from './providers/provider.ts';
export { NativeProvider } from './providers/native/native-provider.ts';
export { DockerProvider } from './providers/docker/docker-provider.ts';
