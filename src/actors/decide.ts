/**
 * The pure decision of one actor command (DESIGN §4 rule 2), shared by the runtime and the test kit: an event is
 * accepted when the current snapshot `can` take it; otherwise the actor type's typed rejection is returned.
 */
import type { AnyMachineSnapshot } from 'xstate';
import { BerthError } from '../../schemas/errors.ts';
import type { ActorType, DomainEvent, Rejection } from './actor-type.ts';
import { step, type YieldedAction } from './machine-step.ts';

export type Decision =
  | { accepted: true; next: AnyMachineSnapshot; actions: YieldedAction[] }
  | { accepted: false; error: BerthError };

/** `event` must already be validated (validateIncoming). */
export function decide(actorType: ActorType, snapshot: AnyMachineSnapshot, event: DomainEvent): Decision {
  if (!snapshot.can(event)) return { accepted: false, error: rejection(actorType, snapshot, event) };
  const [next, actions] = step(actorType.machine, snapshot, event);
  return { accepted: true, next, actions };
}

function rejection(actorType: ActorType, snapshot: AnyMachineSnapshot, event: DomainEvent): BerthError {
  const r: Rejection = actorType.reject?.(snapshot, event) ?? {
    code: 'invalid_state',
    message: `a ${actorType.type} in state ${JSON.stringify(snapshot.value)} does not accept ${event.type}`,
  };
  return new BerthError(r.code, r.message, {
    actorType: actorType.type,
    eventType: event.type,
    state: snapshot.value,
    ...r.detail,
  });
}

/** Whether the actor needs no reconciliation any more (default: its machine reached a final state). */
export const isFinished = (actorType: ActorType, snapshot: AnyMachineSnapshot): boolean =>
  actorType.finished ? actorType.finished(snapshot) : snapshot.status === 'done';
