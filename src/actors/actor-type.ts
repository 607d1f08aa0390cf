/**
 * What an actor type is (DESIGN §4): a pure XState machine, a stream category, zod schemas for the events it
 * accepts, and effect handlers for the actions its transitions yield. The runtime does the rest.
 */
import type { AnyStateMachine, SnapshotFrom } from 'xstate';
import type { z } from 'zod';
import type { ErrorCode } from '../../schemas/errors.ts';

/** What a machine receives: the stored event's type plus its data fields (data never has a `type` key). */
export interface DomainEvent {
  type: string;
  [field: string]: unknown;
}

export interface RuntimeIdentity {
  runtimeId: string;
  epoch: number;
}

/** Handed to every effect. `services` is whatever the composition root registered (providers, artifacts, ...). */
export interface EffectContext<S = unknown> {
  actorType: string;
  actorId: string;
  stream: string;
  runtime: RuntimeIdentity;
  /**
   * The persisted event whose transition yielded this effect (its id is the causationId of what the effect sends).
   * `followedBy` names the events appended after it in the same append (an effect's outcomes are appended together):
   * an effect whose outcome one of them already records has nothing left to report.
   */
  cause: { id: string; type: string; revision: bigint; correlationId: string; followedBy?: readonly string[] };
  services: S;
  /** Send an event to any actor through its mailbox; resolves once it is appended (or rejects with a typed error). */
  send(actorType: string, actorId: string, event: DomainEvent): Promise<void>;
}

/**
 * An effect runs after its event is durable. Whatever it returns is sent back to the same actor as new events
 * (rule 6); an effect that cannot tell whether it happened returns an event saying `unknown`, it never retries blindly.
 * Several events returned together are decided in order and appended at once (one write), each still persisted
 * before the effects of its own transition run.
 */
export type EffectHandler<P = any, S = any> = (
  params: P,
  ctx: EffectContext<S>,
) => Promise<DomainEvent | DomainEvent[] | void> | DomainEvent | DomainEvent[] | void;

export interface Rejection {
  code: ErrorCode;
  message: string;
  detail?: Record<string, unknown>;
}

export interface ActorType<M extends AnyStateMachine = AnyStateMachine, S = any> {
  /** Stream category and actor type name: streams are `<type>-<id>`. */
  type: string;
  machine: M;
  /** Machine input for a fresh actor, derived from its id. */
  input?: (actorId: string) => unknown;
  /** Zod schema of each accepted event's data (without `type`), keyed by event type. Validated on write and read. */
  events: Record<string, z.ZodType>;
  /** Current schema version per event type (default 1) and upcasters from older versions: (data, fromVersion) => data. */
  schemaVersions?: Record<string, number>;
  upcast?: (type: string, data: unknown, fromVersion: number) => unknown;
  /** Effect handlers keyed by the action type the machine names. An action without a handler is a no-op. */
  effects: Record<string, EffectHandler<any, S>>;
  /** True once the actor needs no reconciliation (terminal). Default: the snapshot's status is 'done'. */
  finished?: (snapshot: SnapshotFrom<M>) => boolean;
  /** The typed error for an event the machine does not accept. Default: `invalid_state`. */
  reject?: (snapshot: SnapshotFrom<M>, event: DomainEvent) => Rejection;
}

export const defineActor = <M extends AnyStateMachine, S = any>(t: ActorType<M, S>): ActorType<M, S> => t;

/** Sent to every unfinished actor after rehydration; its transition yields inspection effects, never the original. */
export const RUNTIME_RECOVERED = 'runtime.recovered';
