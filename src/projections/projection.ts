/**
 * What a projection is: a named, pure fold of the global event log into a read model's state, plus the query
 * helpers that read that state. Adding a read model = writing one `defineProjection({...})` and registering it.
 */
import type { z } from 'zod';
import type { EventMap } from '../../schemas/events/event-map.ts';
import type { RecordedEvent, SubscriptionFilter } from '../store/event-store.ts';

/**
 * A stored event of one actor type, its `data` typed by that type's event map (zod checked it when it was appended):
 * what a projection filtered to that type's streams folds. Switching on `type` narrows `data`.
 */
export type StoredEvent<M extends EventMap> = {
  [K in keyof M & string]: Omit<RecordedEvent, 'type' | 'data'> & { type: K; data: z.output<M[K]> };
}[keyof M & string];

/** Query helpers: each receives the current state first, then its own arguments. */
export type Queries<S> = Record<string, (state: S, ...args: any[]) => unknown>;

export interface Projection<S = any, Q extends Queries<S> = Queries<S>, E extends RecordedEvent = RecordedEvent> {
  /** Unique name; the key of its checkpoint. */
  name: string;
  /** Bump when `reduce` or the state's shape changes: a persisted snapshot of another version is discarded. */
  version: number;
  /** Which events `reduce` sees (stream / event-type prefixes). Others only advance the model's position. */
  filter?: SubscriptionFilter;
  init(): S;
  /**
   * The next state after `event`. Pure: depends only on its arguments (no clock, no I/O). It may update `state` in
   * place and return it, since a state belongs to exactly one read model.
   * States are snapshotted with v8.serialize, so Maps, Sets, bigints and Dates are fine; functions are not.
   * `event` is one the filter lets through: a projection of one actor type's streams takes its `StoredEvent`.
   */
  reduce(state: S, event: E): S;
  /** (`& Queries<S>` gives each helper's state argument its type without an annotation.) */
  queries?: Q & Queries<S>;
}

/** A query helper with its state argument bound. */
export type BoundQueries<S, Q extends Queries<S>> = {
  [K in keyof Q]: Q[K] extends (state: S, ...args: infer A) => infer R ? (...args: A) => R : never;
};

export const defineProjection = <S, Q extends Queries<S> = Record<never, never>, E extends RecordedEvent = RecordedEvent>(
  p: Projection<S, Q, E>,
): Projection<S, Q, E> => p;
