/**
 * Where read models live: each projection's tables by generation, and its checkpoint (version, generation, position)
 * written in the same transaction as the rows, so a restart resumes exactly where the rows are. The projection
 * engine is the only writer. SQLite (sqlite-read-model-store.ts) serves both event stores; another backend implements
 * this interface and the engine and projections stay as they are.
 */
import type { Projection, Tables } from './projection.ts';

export interface SavedCheckpoint {
  version: number;
  /** Which generation of the projection's tables the position belongs to (a rebuild fills the next one). */
  generation: number;
  /** Global position of the last event the rows reflect (-1n: none). */
  position: bigint;
}

export interface ReadModelStore {
  checkpoint(name: string): SavedCheckpoint | undefined;
  /** Opens the tables of `projection` at `generation`, creating them when new. */
  tables<T>(projection: Projection<T>, generation: number): Tables<T>;
  /** Drops every generation of `name`'s tables except `keep` (and the checkpoint when `keep` is undefined). */
  drop(name: string, keep?: number): void;
  /**
   * Runs a reducer's writes: they join the open transaction (opened on demand) and nothing is durable before
   * `commit`. If `fn` throws, some of its writes may have happened: the engine then records the model for a rebuild.
   */
  write(fn: () => void): void;
  /** Records a checkpoint in the open transaction. */
  setCheckpoint(name: string, checkpoint: SavedCheckpoint): void;
  /** Commits the open transaction: every row written and checkpoint set since the last commit, together. */
  commit(): void;
  /** The id of the first event of the log the read models were built from ('' before any). */
  logIdentity(): string;
  /** Records which log the read models belong to; another log's models are dropped (they would be meaningless). */
  adoptLog(identity: string): void;
  close(): void;
}
