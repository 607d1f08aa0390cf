/**
 * The projection engine: keeps every registered read model up to date with the global log. One subscription to all
 * events feeds every model; each model applies the events its filter selects and advances its position on every
 * event, so `waitFor(P)` works for any position P (a store-side filtered subscription could not tell a model that
 * it has passed P when the event at P is not for it). Checkpoints (position + state snapshot) are saved together
 * every `checkpointIntervalMs` / `checkpointEvery` events and at stop, so a restart resumes exactly where it was.
 */
import { serialize, deserialize } from 'node:v8';
import { pino, type Logger } from 'pino';
import { isBerthError } from '../../schemas/errors.ts';
import { matchesFilter, type EventStore, type RecordedEvent, type Subscription } from '../store/event-store.ts';
import type { CheckpointStore, Checkpoint } from './checkpoint-store.ts';
import type { Projection, Queries } from './projection.ts';
import { ReadModel } from './read-model.ts';

export interface ProjectionEngineOptions {
  store: EventStore;
  checkpoints: CheckpointStore;
  logger?: Logger;
  /** Save dirty checkpoints this often (ms). Default 1000. */
  checkpointIntervalMs?: number;
  /** ...and after this many events. Default 10 000. */
  checkpointEvery?: number;
  /** Page size of rebuild reads. Default 1000. */
  pageSize?: number;
}

interface Entry {
  model: ReadModel;
  /** Position of the last saved checkpoint, and whether the state changed since. */
  savedPosition: bigint;
  stateDirty: boolean;
}

export class ProjectionEngine {
  private readonly store: EventStore;
  private readonly checkpoints: CheckpointStore;
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
    this.checkpoints = opts.checkpoints;
    this.log = opts.logger ?? pino({ level: 'silent' });
    this.checkpointIntervalMs = opts.checkpointIntervalMs ?? 1000;
    this.checkpointEvery = opts.checkpointEvery ?? 10_000;
    this.pageSize = opts.pageSize ?? 1000;
    this.fatal = new Promise<never>((_, reject) => (this.failFatal = reject));
    this.fatal.catch(() => undefined);
  }

  /** Adds a projection (before `start`) and returns its read model. */
  register<S, Q extends Queries<S>>(projection: Projection<S, Q>): ReadModel<S, Q> {
    if (this.started) throw new Error(`projection ${projection.name} registered after the engine started`);
    if (this.entries.has(projection.name)) throw new Error(`projection ${projection.name} is registered twice`);
    const model = new ReadModel(projection);
    this.entries.set(projection.name, { model, savedPosition: -1n, stateDirty: false });
    return model;
  }

  get(name: string): ReadModel | undefined {
    return this.entries.get(name)?.model;
  }

  get models(): ReadModel[] {
    return [...this.entries.values()].map((e) => e.model);
  }

  /** Loads each model's snapshot when it is valid for this log and version, then follows the log. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    const head = await this.store.headPosition();
    this.logIdentity = await this.firstEventId();
    this.checkpoints.adoptLog(this.logIdentity);
    for (const entry of this.entries.values()) this.restore(entry, head);
    if (this.entries.size === 0) return; // nothing to keep up to date: do not read the log at all
    this.loop = this.follow();
    this.timer = setInterval(() => this.saveCheckpoints(), this.checkpointIntervalMs);
    this.timer.unref();
  }

  /** Resolves once every model reflects the log's head as it was when called. Rejects if a model failed. */
  async catchUp(timeoutMs = 60 * 60_000): Promise<void> {
    const head = await this.store.headPosition();
    for (const { model } of this.entries.values()) {
      const reached = await Promise.race([model.waitFor(head, timeoutMs), this.fatal]);
      if (!reached) throw new Error(`projection ${model.name} did not reach position ${head} in ${timeoutMs} ms`);
    }
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

  private restore(entry: Entry, head: bigint): void {
    const { model } = entry;
    const saved = this.checkpoints.load(model.name);
    if (!saved) return;
    if (saved.version !== model.projection.version || saved.position > head) {
      // Another reducer version, or a log that is shorter than the checkpoint: the snapshot cannot be trusted.
      this.log.info({ projection: model.name, position: saved.position.toString() }, 'projection snapshot discarded');
      this.checkpoints.remove(model.name);
      return;
    }
    try {
      model.reset(deserialize(saved.state), saved.position);
      entry.savedPosition = saved.position;
    } catch (e) {
      this.log.warn({ projection: model.name, err: e }, 'projection snapshot unreadable; rebuilding from the start');
      this.checkpoints.remove(model.name);
    }
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
        if (isBerthError(e, 'corrupt_event')) {
          // Never skipped: every model stays at the event before it until an operator repairs the log.
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

  private apply(event: RecordedEvent): void {
    if (this.logIdentity === '') {
      // Every model started from an empty log, so this is the log's first event: it names the log.
      this.logIdentity = event.id;
      this.checkpoints.adoptLog(event.id);
    }
    this.loopPosition = event.position;
    for (const entry of this.entries.values()) {
      const { model } = entry;
      if (model.error || event.position <= model.position) continue;
      this.applyTo(entry, model, event);
    }
    if (++this.sinceCheckpoint >= this.checkpointEvery) this.saveCheckpoints();
  }

  private applyTo(entry: Entry, model: ReadModel, event: RecordedEvent): void {
    if (!matchesFilter(event, model.projection.filter)) {
      model.advance(model.state, event.position);
      return;
    }
    try {
      model.advance(model.projection.reduce(model.state, event), event.position);
      entry.stateDirty = true;
    } catch (e) {
      this.log.error({ err: e, projection: model.name, position: event.position.toString() }, 'projection failed');
      model.fail(e, event.position);
    }
  }

  private async rebuildNow(entry: Entry): Promise<void> {
    const { model } = entry;
    const fresh = new ReadModel(model.projection);
    let position = -1n;
    const readPage = async () => {
      const page = await this.store.readAll({ fromPosition: position < 0n ? 'start' : position, maxCount: this.pageSize });
      for (const event of page) {
        this.applyTo(entry, fresh, event);
        if (fresh.error) throw fresh.error;
        position = event.position;
      }
      return page.length;
    };
    // Bulk of the work while the live model keeps serving; then pause the live loop and close the gap.
    while ((await readPage()) === this.pageSize);
    let open!: () => void;
    this.gate = new Promise((r) => (open = r));
    try {
      // Up to whatever the live loop has handled, which a failed model skipped.
      const target = model.position > this.loopPosition ? model.position : this.loopPosition;
      while (position < target && (await readPage()) > 0);
      model.reset(fresh.state, position > target ? position : target);
      entry.stateDirty = true;
      this.saveCheckpoints();
    } finally {
      this.gate = undefined;
      open();
    }
    this.log.info({ projection: model.name, position: model.position.toString() }, 'projection rebuilt');
  }

  private lowestPosition(): bigint {
    let lowest: bigint | undefined;
    for (const { model } of this.entries.values()) {
      if (!model.error && (lowest === undefined || model.position < lowest)) lowest = model.position;
    }
    return lowest ?? -1n;
  }

  private saveCheckpoints(): void {
    this.sinceCheckpoint = 0;
    const changed: { entry: Entry; checkpoint: Checkpoint }[] = [];
    for (const entry of this.entries.values()) {
      const { model } = entry;
      if (model.position === entry.savedPosition && !entry.stateDirty) continue;
      changed.push({
        entry,
        checkpoint: {
          name: model.name,
          version: model.projection.version,
          position: model.position,
          state: entry.stateDirty || entry.savedPosition < 0n ? serialize(model.state) : undefined,
        },
      });
    }
    if (changed.length === 0) return;
    try {
      this.checkpoints.save(changed.map((c) => c.checkpoint));
      for (const { entry, checkpoint } of changed) {
        entry.savedPosition = checkpoint.position;
        entry.stateDirty = false;
      }
    } catch (e) {
      // A failed save only costs replay time after a restart; the models stay correct in memory.
      this.log.warn({ err: e }, 'projection checkpoints not saved');
    }
  }

  private async firstEventId(): Promise<string> {
    const [first] = await this.store.readAll({ maxCount: 1 });
    return first?.id ?? '';
  }
}
