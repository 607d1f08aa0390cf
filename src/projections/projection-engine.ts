/**
 * The projection engine: keeps every registered read model up to date with the global log. One subscription to all
 * events feeds every model; each model applies the events its filter selects and advances its position on every
 * event, so `waitFor(P)` works for any position P (a store-side filtered subscription could not tell a model that
 * it has passed P when the event at P is not for it). Rows and positions are committed together every
 * `checkpointIntervalMs` / `checkpointEvery` events and at stop, so a restart resumes exactly where it was, and a
 * commit costs what changed since the last one.
 */
import { pino, type Logger } from 'pino';
import { isBerthError } from '../../schemas/errors.ts';
import { CorruptEvent, matchesFilter, type EventStore, type RecordedEvent, type Subscription } from '../store/event-store.ts';
import type { Projection, Queries } from './projection.ts';
import type { ReadModelStore } from './read-model-store.ts';
import { ReadModel } from './read-model.ts';

export interface ProjectionEngineOptions {
  store: EventStore;
  models: ReadModelStore;
  logger?: Logger;
  /** Commit changed rows and positions this often (ms). Default 1000. */
  checkpointIntervalMs?: number;
  /** ...and after this many events. Default 10 000. */
  checkpointEvery?: number;
  /** Page size of rebuild reads. Default 1000. */
  pageSize?: number;
}

/** An event of the log, or one that cannot be decoded, known by its place in the log. */
type LogItem = RecordedEvent | PlacedCorruptEvent;
type PlacedCorruptEvent = CorruptEvent & { at: { position: bigint; type: string } };

const isPlaced = (e: unknown): e is PlacedCorruptEvent => e instanceof CorruptEvent && e.at !== undefined;
const placeOf = (item: LogItem): { position: bigint; type: string } => (item instanceof CorruptEvent ? item.at : item);

interface Entry {
  model: ReadModel;
  /** Position of the last checkpoint set. */
  savedPosition: bigint;
}

export class ProjectionEngine {
  private readonly store: EventStore;
  private readonly readModels: ReadModelStore;
  private readonly log: Logger;
  private readonly checkpointIntervalMs: number;
  private readonly checkpointEvery: number;
  private readonly pageSize: number;
  private readonly entries = new Map<string, Entry>();
  private subscription?: Subscription;
  private loop?: Promise<void>;
  private timer?: NodeJS.Timeout;
  private stopping = false;
  private started = false;
  private sinceCheckpoint = 0;
  /** While set, the live loop waits before applying the next event (a rebuild is swapping a model in). */
  private gate?: Promise<void>;
  private rebuilds: Promise<unknown> = Promise.resolve();
  /** Rejects when the log holds an event that cannot be decoded: nothing past it can be applied. */
  private readonly fatal: Promise<never>;
  private failFatal!: (error: unknown) => void;
  /** Position of the last event the live loop handled. */
  private loopPosition = -1n;
  private logIdentity = '';

  constructor(opts: ProjectionEngineOptions) {
    this.store = opts.store;
    this.readModels = opts.models;
    this.log = opts.logger ?? pino({ level: 'silent' });
    this.checkpointIntervalMs = opts.checkpointIntervalMs ?? 1000;
    this.checkpointEvery = opts.checkpointEvery ?? 10_000;
    this.pageSize = opts.pageSize ?? 1000;
    this.fatal = new Promise<never>((_, reject) => (this.failFatal = reject));
    this.fatal.catch(() => undefined);
  }

  /**
   * Adds a projection (before `start`) and returns its read model, on its saved tables when they are of this
   * projection version (a crashed rebuild's unfinished generation is dropped), else on new empty ones.
   */
  register<T, Q extends Queries<T>>(projection: Projection<T, Q>): ReadModel<T, Q> {
    if (this.started) throw new Error(`projection ${projection.name} registered after the engine started`);
    if (this.entries.has(projection.name)) throw new Error(`projection ${projection.name} is registered twice`);
    const saved = this.readModels.checkpoint(projection.name);
    let model: ReadModel<T, Q>;
    if (saved && saved.version === projection.version) {
      this.readModels.drop(projection.name, saved.generation);
      model = new ReadModel(projection, this.readModels.tables(projection, saved.generation), saved.generation, saved.position);
    } else {
      if (saved) this.log.info({ projection: projection.name, version: saved.version }, 'read model of another version dropped');
      model = this.fresh(projection, (saved?.generation ?? 0) + 1);
    }
    this.readModels.commit();
    this.entries.set(projection.name, { model, savedPosition: model.position });
    return model;
  }

  get(name: string): ReadModel | undefined {
    return this.entries.get(name)?.model;
  }

  get models(): ReadModel[] {
    return [...this.entries.values()].map((e) => e.model);
  }

  /** Keeps each model's tables when they were built from this log, up to its head at most; then follows the log. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const head = await this.store.headPosition();
    this.logIdentity = await this.firstEventId();
    this.readModels.adoptLog(this.logIdentity);
    for (const entry of this.entries.values()) this.restore(entry, head);
    this.readModels.commit();
    if (this.entries.size === 0) return; // nothing to keep up to date: do not read the log at all
    this.loop = this.follow();
    this.timer = setInterval(() => this.saveCheckpoints(), this.checkpointIntervalMs);
    this.timer.unref();
  }

  /**
   * Resolves once every model reflects the log's head as it was when called, or has failed: a failed model says so
   * (`failed`, its queries answer `projection_failed`) and does not hold the others or the start back. Rejects when
   * the log cannot be read past an event no model can be told about.
   */
  async catchUp(timeoutMs = 60 * 60_000): Promise<void> {
    const head = await this.store.headPosition();
    for (const { model } of this.entries.values()) {
      const reached = await Promise.race([model.waitFor(head, timeoutMs).catch((e: unknown) => (model.error ? true : Promise.reject(e))), this.fatal]);
      if (!reached) throw new Error(`projection ${model.name} did not reach position ${head} in ${timeoutMs} ms`);
    }
  }

  /** The models that failed, with why: they answer nothing until `rebuild` (after a fix, or a restart). */
  get failed(): { name: string; position: string; message: string }[] {
    return this.models.filter((m) => m.error).map((m) => ({ name: m.name, position: String(m.error!.detail?.position ?? ''), message: m.error!.message }));
  }

  /** Head position minus each model's position (0 when caught up). */
  async lag(): Promise<Record<string, bigint>> {
    const head = await this.store.headPosition();
    const lag: Record<string, bigint> = {};
    for (const { model } of this.entries.values()) lag[model.name] = head > model.position ? head - model.position : 0n;
    return lag;
  }

  /**
   * Recomputes one model from the first event. The current model keeps serving until the fresh state has caught
   * up; then the live loop pauses for the swap, so the model never goes back in time.
   */
  rebuild(name: string): Promise<void> {
    const entry = this.entries.get(name);
    if (!entry) return Promise.reject(new Error(`no projection named ${name}`));
    const run = this.rebuilds.then(() => this.rebuildNow(entry));
    this.rebuilds = run.catch(() => undefined);
    return run;
  }

  /** Saves every changed checkpoint now. */
  checkpoint(): void {
    this.saveCheckpoints();
  }

  /** Stops following the log and saves the checkpoints. Pending `waitFor`s resolve false. */
  async stop(): Promise<void> {
    if (!this.started || this.stopping) return;
    this.stopping = true;
    clearInterval(this.timer);
    await this.rebuilds;
    await this.subscription?.close();
    await this.loop;
    this.saveCheckpoints();
    for (const { model } of this.entries.values()) model.abandonWaiters();
  }

  /** Starts a model over on new tables when its rows came from another log or reach past this log's head. */
  private restore(entry: Entry, head: bigint): void {
    const { model } = entry;
    if (this.readModels.checkpoint(model.name) && model.position <= head) return;
    if (model.position >= 0n) this.log.info({ projection: model.name, position: model.position.toString() }, 'read model discarded');
    const fresh = this.fresh(model.projection, model.generation + 1);
    model.reset(fresh.tables, fresh.generation, -1n);
    entry.savedPosition = -1n;
  }

  /** A model on new empty tables of `generation` (every other generation dropped), recorded at position -1. */
  private fresh<T, Q extends Queries<T>>(projection: Projection<T, Q>, generation: number): ReadModel<T, Q> {
    this.readModels.drop(projection.name);
    this.readModels.setCheckpoint(projection.name, { version: projection.version, generation, position: -1n });
    return new ReadModel(projection, this.readModels.tables(projection, generation), generation);
  }

  /** The live loop: one subscription from the lowest model position; resubscribes with backoff when it drops. */
  private async follow(): Promise<void> {
    let backoffMs = 100;
    while (!this.stopping) {
      const from = this.lowestPosition();
      const subscription = this.store.subscribeToAll({ fromPosition: from < 0n ? 'start' : from });
      this.subscription = subscription;
      try {
        for await (const event of subscription) {
          if (this.gate) await this.gate;
          this.apply(event);
          backoffMs = 100;
        }
      } catch (e) {
        if (this.stopping) break;
        if (isPlaced(e)) {
          // Never skipped for a model it is for: that model fails at it. The others pass it, and the loop goes on.
          this.log.error({ err: e }, 'an event cannot be decoded; the read models it is for have failed');
          this.apply(e);
          await subscription.close().catch(() => undefined);
          continue;
        }
        if (isBerthError(e, 'corrupt_event')) {
          // Where it is in the log is unknown: every model stays at the event before it until the log is repaired.
          this.log.error({ err: e }, 'projections stopped at an event that cannot be decoded');
          this.failFatal(e);
          return;
        }
        this.log.warn({ err: e, retryInMs: backoffMs }, 'projection subscription dropped; resubscribing');
        await subscription.close().catch(() => undefined);
        await new Promise((r) => setTimeout(r, backoffMs));
        backoffMs = Math.min(backoffMs * 2, 5000);
      }
    }
  }

  private apply(item: LogItem): void {
    if (this.logIdentity === '' && !(item instanceof CorruptEvent)) {
      // Every model started from an empty log, so this is the log's first event: it names the log.
      this.logIdentity = item.id;
      this.readModels.adoptLog(item.id);
    }
    const { position } = placeOf(item);
    this.loopPosition = position;
    for (const entry of this.entries.values()) {
      const { model } = entry;
      if (model.error || position <= model.position) continue;
      this.applyTo(model, item);
      if (model.error) this.condemn(entry);
    }
    if (++this.sinceCheckpoint >= this.checkpointEvery) this.saveCheckpoints();
  }

  /** One event, or the undecodable one at its place, to one model: a model it is for applies it or fails at it. */
  private applyTo(model: ReadModel, item: LogItem): void {
    const { position, type } = placeOf(item);
    if (!matchesFilter({ stream: item.stream, type }, model.projection.filter)) {
      model.advance(position);
      return;
    }
    if (item instanceof CorruptEvent) {
      model.fail(item, position);
      return;
    }
    try {
      this.readModels.write(() => model.projection.reduce(model.tables, item));
      model.advance(position);
    } catch (e) {
      this.log.error({ err: e, projection: model.name, position: position.toString() }, 'projection failed');
      model.fail(e, position);
    }
  }

  /**
   * A model whose reducer threw may hold part of that event's writes beside rows not yet committed, so its tables no
   * longer match any position: it keeps serving them (flagged failed), but what is committed points at the next
   * generation from the start, so a restart rebuilds it from the log (as `rebuild` does now).
   */
  private condemn(entry: Entry): void {
    const { model } = entry;
    this.readModels.setCheckpoint(model.name, { version: model.projection.version, generation: model.generation + 1, position: -1n });
    entry.savedPosition = -1n;
  }

  private async rebuildNow(entry: Entry): Promise<void> {
    const { model } = entry;
    const generation = model.generation + 1;
    const fresh = new ReadModel(model.projection, this.readModels.tables(model.projection, generation), generation);
    let position = -1n;
    let failedAt: bigint | undefined;
    /** Applies the next page; false once the log's end is reached. */
    const readPage = async () => {
      const page = await this.readPage(position);
      for (const item of page) {
        this.applyTo(fresh, item);
        if (fresh.error) {
          failedAt = placeOf(item).position;
          throw fresh.error;
        }
        position = placeOf(item).position;
      }
      return page.length === this.pageSize || page.at(-1) instanceof CorruptEvent;
    };
    let open!: () => void;
    try {
      // Bulk of the work while the live model keeps serving; then pause the live loop and close the gap.
      while (await readPage());
      this.gate = new Promise((r) => (open = r));
      // Up to whatever the live loop has handled, which a failed model skipped.
      const target = model.position > this.loopPosition ? model.position : this.loopPosition;
      while (position < target && (await readPage()));
      model.reset(fresh.tables, generation, position > target ? position : target);
      this.readModels.drop(model.name, generation);
      this.saveCheckpoints();
    } catch (e) {
      if (model.generation !== generation) this.readModels.drop(model.name, model.generation);
      if (failedAt !== undefined) {
        // Today's code cannot build it from this log: the rows it serves would mislead, so it says so instead.
        model.fail(fresh.error!.cause, failedAt);
        this.condemn(entry);
      }
      throw e;
    } finally {
      this.gate = undefined;
      open?.();
    }
    this.log.info({ projection: model.name, position: model.position.toString() }, 'projection rebuilt');
  }

  /**
   * The next page of the log after `position`. A page holding an undecodable event cannot be read whole: it is read
   * one event at a time up to that event, which ends the page in its place.
   */
  private async readPage(position: bigint): Promise<LogItem[]> {
    const read = (maxCount: number) => this.store.readAll({ fromPosition: position < 0n ? 'start' : position, maxCount });
    try {
      return await read(this.pageSize);
    } catch (e) {
      if (!isPlaced(e)) throw e;
    }
    const page: LogItem[] = [];
    for (;;) {
      try {
        const [event] = await read(1);
        if (!event) return page;
        page.push(event);
        position = event.position;
      } catch (e) {
        if (!isPlaced(e)) throw e;
        page.push(e);
        return page;
      }
    }
  }

  private lowestPosition(): bigint {
    let lowest: bigint | undefined;
    for (const { model } of this.entries.values()) {
      if (!model.error && (lowest === undefined || model.position < lowest)) lowest = model.position;
    }
    // With every model failed, the loop still follows from where it is (a rebuild closes its gap against that).
    return lowest ?? this.loopPosition;
  }

  /** Sets each moved model's position beside its rows and commits them together. */
  private saveCheckpoints(): void {
    this.sinceCheckpoint = 0;
    try {
      for (const entry of this.entries.values()) {
        const { model } = entry;
        if (model.error || model.position === entry.savedPosition) continue;
        this.readModels.setCheckpoint(model.name, { version: model.projection.version, generation: model.generation, position: model.position });
        entry.savedPosition = model.position;
      }
      this.readModels.commit();
    } catch (e) {
      // The rows and positions stay in the open transaction; the next checkpoint commits them.
      this.log.warn({ err: e }, 'projection checkpoints not committed');
    }
  }

  private async firstEventId(): Promise<string> {
    const [first] = await this.store.readAll({ maxCount: 1 });
    return first?.id ?? '';
  }
}
