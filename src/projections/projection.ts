/**
 * What a projection is: a named, pure fold of the global event log into a read model's state, plus the query
 * helpers that read that state. Adding a read model = writing one `defineProjection({...})` and registering it.
 */
import type { RecordedEvent, SubscriptionFilter } from '../store/event-store.ts';

/** Query helpers: each receives the current state first, then its own arguments. */
export type Queries<S> = Record<string, (state: S, ...args: any[]) => unknown>;

export interface Projection<S = any, Q extends Queries<S> = Queries<S>> {
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
   */
  reduce(state: S, event: RecordedEvent): S;
  /** (`& Queries<S>` gives each helper's state argument its type without an annotation.) */
  queries?: Q & Queries<S>;
}

/** A query helper with its state argument bound. */
export type BoundQueries<S, Q extends Queries<S>> = {
  [K in keyof Q]: Q[K] extends (state: S, ...args: infer A) => infer R ? (...args: A) => R : never;
};

export const defineProjection = <S, Q extends Queries<S> = Record<never, never>>(p: Projection<S, Q>): Projection<S, Q> =>
  p;
