/**
 * The actor layer's public surface (DESIGN §4). Everything else under src/actors is internal.
 *
 * Writing an actor type (see test/fixtures/actors/counter.actor.ts for a small complete one):
 * - The machine is pure: no invoke/spawn/after, no clock, no ids; whatever varies arrives in the event. Its context
 *   must be JSON (it goes into snapshots). Its input is `actorType.input(id)`, default `{ id }`.
 * - Effects are named actions declared as typed no-op stubs in `setup({ actions })`; the runtime runs
 *   `effects[name](params, ctx)` after the event is appended, outside the mailbox. An effect reports its outcome by
 *   returning events (or `ctx.send`); it turns its own failures into `…failed` / `…unknown` events, because an
 *   effect that throws is only logged. Actions of the initial state never run (no event caused them).
 * - `events` holds a zod schema per event type for the data (fields minus `type`); `runtime.recovered`
 *   {runtimeId, epoch, at} is added by the runtime when absent. Each unfinished actor gets it after a restart: its
 *   transition should yield inspection effects, never the original effect again.
 * - `finished(snapshot)` (default: final state reached) says the actor needs no reconciliation; `reject` gives the
 *   typed error for an event its state does not accept (default `invalid_state`).
 * - Changing an event's shape: bump `schemaVersions[type]` and teach `upcast` the old versions.
 *
 * Using the runtime: `new ActorRuntime({ store, runtimeId, services })`, `register(type)` for each type, `start()`
 * (fences the epoch), `recover()`, then `send(type, id, event)` / `get(type, id)`; `whenIdle()` before stopping.
 */
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
export { runtimeStreamOf } from './epoch-fence.ts';
export { RUNTIME_STARTED } from '../../schemas/events/runtime.ts';
export { replayStream, type ReplayedEvent } from './replay.ts';
export { SNAPSHOT_PREFIX, snapshotStreamOf } from './snapshot-stream.ts';
export { actorSpec, restartCheck, snapshotAfter, type SpecExpectation, type SpecOutcome } from './testing.ts';
