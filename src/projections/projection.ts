/**
 * What a projection is: a named, deterministic fold of the global event log into rows of its own tables, plus the
 * query helpers that read them. Tables live in a read-model store (SQLite by default), so a model costs disk, not
 * memory, and a checkpoint commits only the rows changed since the last one. Adding a read model = writing one
 * `defineProjection({...})` and registering it.
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

/** A value a row exposes to filters and indexes (a boolean is kept as 0/1). */
export type ColumnValue = string | number | boolean | null;

/** A filter: each named column equals the value, or one of the values of an array. */
export type Where<R> = { [C in keyof R & string]?: ColumnValue | readonly ColumnValue[] };

/**
 * One table of a projection. Rows are JSON documents under a string key, kept in insertion order (a row's place does
 * not change when it is updated). `columns` are top-level scalar fields copied out for `Where` filters; `indexes`
 * name the column lists that filters use (each index also orders by insertion, so a filtered page is a range read).
 */
export interface TableSpec<R = unknown> {
  columns?: readonly (keyof R & string)[];
  indexes?: readonly (readonly (keyof R & string)[])[];
  /** Phantom: carries the row type. */
  readonly row?: R;
}

export const table = <R>(spec: Omit<TableSpec<R>, 'row'> = {}): TableSpec<R> => spec;

export interface PageRequest<R> {
  where?: Where<R>;
  /** The `next` of the previous page: rows strictly after it in the order asked. */
  after?: number;
  limit: number;
  order?: 'asc' | 'desc';
}

export interface Page<R> {
  rows: R[];
  /** Where the next page starts, when more rows may follow. */
  next?: number;
}

export interface Table<R> {
  get(key: string): R | undefined;
  /** Inserts or replaces the row under `key` (a replaced row keeps its place in the order). */
  put(key: string, row: R): void;
  delete(key: string): void;
  page(request: PageRequest<R>): Page<R>;
  count(where?: Where<R>): number;
  /** Every matching row in insertion order: only for filters whose matches stay small (work in flight). */
  all(where?: Where<R>): R[];
  /** The key of every matching row in insertion order, without reading or parsing the rows. */
  keys(where?: Where<R>): string[];
}

export type Tables<T> = { [K in keyof T]: Table<T[K]> };
export type TableSpecs<T> = { [K in keyof T]: TableSpec<T[K]> };

/** Query helpers: each receives the model's tables first, then its own arguments. */
export type Queries<T> = Record<string, (tables: Tables<T>, ...args: any[]) => unknown>;

export interface Projection<T = any, Q extends Queries<T> = Queries<T>, E extends RecordedEvent = RecordedEvent> {
  /** Unique name; the key of its checkpoint. */
  name: string;
  /** Bump when `reduce` or a table's shape changes: tables of another version are dropped and rebuilt. */
  version: number;
  /** Which events `reduce` sees (stream / event-type prefixes). Others only advance the model's position. */
  filter?: SubscriptionFilter;
  tables: TableSpecs<T>;
  /**
   * Applies `event` to the tables. Deterministic: depends only on its arguments and the rows (no clock, no I/O). If
   * it throws, none of its writes stay and the model stops at the event before.
   */
  reduce(tables: Tables<T>, event: E): void;
  /** (`& Queries<T>` gives each helper's tables argument its type without an annotation.) */
  queries?: Q & Queries<T>;
}

/** A query helper with its tables argument bound. */
export type BoundQueries<T, Q extends Queries<T>> = {
  [K in keyof Q]: Q[K] extends (tables: Tables<T>, ...args: infer A) => infer R ? (...args: A) => R : never;
};

export const defineProjection = <T, Q extends Queries<T> = Record<never, never>, E extends RecordedEvent = RecordedEvent>(
  p: Projection<T, Q, E>,
): Projection<T, Q, E> => p;
