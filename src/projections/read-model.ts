/**
 * A read model: the tables of one projection, the global position they reflect, and `waitFor` for read-your-writes
 * (a writer that appended at position P waits until the model has scanned P). Only the projection engine changes it.
 */
import { BerthError } from '../../schemas/errors.ts';
import type { BoundQueries, Projection, Queries, Tables } from './projection.ts';

interface Waiter {
  position: bigint;
  resolve(reached: boolean): void;
  reject(error: unknown): void;
  timer: NodeJS.Timeout;
}

export class ReadModel<T = any, Q extends Queries<T> = Queries<T>> {
  readonly projection: Projection<T, Q>;
  readonly query: BoundQueries<T, Q>;
  private current: Tables<T>;
  private currentGeneration: number;
  private at = -1n;
  private failure?: BerthError;
  private waiters: Waiter[] = [];

  constructor(projection: Projection<T, Q>, tables: Tables<T>, generation: number, position = -1n) {
    this.projection = projection;
    this.current = tables;
    this.currentGeneration = generation;
    this.at = position;
    const bound: Record<string, (...args: unknown[]) => unknown> = {};
    for (const [name, fn] of Object.entries(projection.queries ?? {})) {
      // A failed model answers nothing: its rows stop at an event the others have passed, so they would mislead.
      bound[name] = (...args) => {
        if (this.failure) throw this.failure;
        return fn(this.current, ...args);
      };
    }
    this.query = bound as BoundQueries<T, Q>;
  }

  get name(): string {
    return this.projection.name;
  }

  get tables(): Tables<T> {
    return this.current;
  }

  /** Which generation of the projection's tables this model reads. */
  get generation(): number {
    return this.currentGeneration;
  }

  /** The global position of the last event this model has scanned (-1n: none). Events outside its filter count. */
  get position(): bigint {
    return this.at;
  }

  /** Set when the reducer threw (or its event cannot be decoded): the model stops at the event before, until rebuilt. */
  get error(): BerthError | undefined {
    return this.failure;
  }

  /**
   * Resolves true once the model reflects every event up to `position`, false after `timeoutMs`. Rejects with
   * `projection_failed` if the model has failed (it would never get there).
   */
  waitFor(position: bigint, timeoutMs: number): Promise<boolean> {
    if (this.at >= position) return Promise.resolve(true);
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        position,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve(false);
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** @internal engine only: replace tables and position together (rebuild swap). */
  reset(tables: Tables<T>, generation: number, position: bigint): void {
    this.current = tables;
    this.currentGeneration = generation;
    this.at = position;
    this.failure = undefined;
    this.release();
  }

  /** @internal engine only: the tables reflect the event at `position` (applied or skipped). */
  advance(position: bigint): void {
    this.at = position;
    if (this.waiters.length > 0) this.release();
  }

  /** @internal engine only. */
  fail(cause: unknown, position: bigint): void {
    this.failure = new BerthError(
      'projection_failed',
      `projection ${this.name} failed on the event at position ${position}: ${(cause as Error)?.message ?? cause}`,
      { projection: this.name, position: position.toString() },
      { cause },
    );
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(this.failure);
    }
    this.waiters = [];
  }

  /** @internal engine only: the engine stopped, so pending waits end now with false. */
  abandonWaiters(): void {
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.resolve(false);
    }
    this.waiters = [];
  }

  private release(): void {
    const pending: Waiter[] = [];
    for (const w of this.waiters) {
      if (w.position <= this.at) {
        clearTimeout(w.timer);
        w.resolve(true);
      } else pending.push(w);
    }
    this.waiters = pending;
  }
}
