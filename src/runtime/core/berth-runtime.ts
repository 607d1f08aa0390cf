/**
 * The runtime's lifecycle (DESIGN §11), for the actor types and read models it is given (berth.ts, the composition
 * root, gives Berth's from registry.ts): opens the event store, starts the actor runtime (fencing a new epoch),
 * catches the projections up, rehydrates and reconciles every unfinished actor, and starts the maintenance loop. Only
 * then is the runtime ready to admit work. `stop` drains the maintenance loop and in-flight effects before closing.
 */
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import { ActorRuntime, type RecoveryReport } from '../../actors/index.ts';
import type { ActorType, RuntimeIdentity } from '../../actors/actor-type.ts';
import type { Projection } from '../../projections/projection.ts';
import { ProjectionEngine } from '../../projections/projection-engine.ts';
import { unfinishedActorsProjection, type UnfinishedActor } from '../../projections/unfinished-actors.projection.ts';
import { runtimesProjection, type RuntimeRow } from '../../projections/runtimes.projection.ts';
import { ownerUrl } from './owner-url.ts';
import { recordRuntimeEvent } from '../../actors/epoch-fence.ts';
import { RUNTIME_RETIRED, RUNTIME_SERVING, RUNTIME_STOPPED } from '../../../schemas/events/runtime.ts';
import { SqliteReadModelStore } from '../../projections/sqlite-read-model-store.ts';
import type { EventStore } from '../../store/event-store.ts';
import type { Settings } from '../config.ts';
import { MaintenanceLoop, type MaintenanceTask } from '../maintenance/maintenance-loop.ts';
import { openConfiguredStore } from './open-configured-store.ts';
import { BerthMetrics } from './metrics-registry.ts';
import { TimedEventStore } from './timed-event-store.ts';

export interface BerthRuntimeOptions<S = unknown> {
  settings: Pick<Settings, 'dataDir' | 'store' | 'maintenanceMs'>;
  runtimeId: string;
  logger?: Logger;
  actorTypes: ActorType<any, S>[];
  projections: Projection[];
  maintenanceTasks?: MaintenanceTask[];
  /** Handed to effects (providers, artifact store, ...). */
  services?: S;
  /** Called once the actor runtime exists, before recovery runs effects (binds services that need it). */
  onActors?: (actors: ActorRuntime<S>) => void;
  /** Aborted when stopping, after the maintenance loop drained: long-running effects give up (recovery resumes them). */
  shutdown?: AbortController;
  /** The registry `/metrics` exposes (default: a new one); the store's families are registered on it. */
  metrics?: BerthMetrics;
}

/** How long an actor whose effect's outcome was lost waits before it is reconciled (the store may be recovering). */
const STRANDED_AFTER_MS = 5_000;

export class BerthRuntime<S = unknown> {
  readonly store: EventStore;
  readonly actors: ActorRuntime<S>;
  readonly projections: ProjectionEngine;
  readonly maintenance: MaintenanceLoop;
  readonly identity: RuntimeIdentity;
  readonly recovery: RecoveryReport;
  /** This Berth's Prometheus registry: modules register their families on it (metrics-registry.ts). */
  readonly metrics: BerthMetrics;
  private readonly readModels: SqliteReadModelStore;
  private readonly log: Logger;
  private stopping?: Promise<void>;
  private readonly shutdown?: AbortController;

  private constructor(parts: {
    store: EventStore;
    actors: ActorRuntime<S>;
    projections: ProjectionEngine;
    readModels: SqliteReadModelStore;
    maintenance: MaintenanceLoop;
    identity: RuntimeIdentity;
    recovery: RecoveryReport;
    metrics: BerthMetrics;
    log: Logger;
    shutdown?: AbortController;
  }) {
    this.shutdown = parts.shutdown;
    this.store = parts.store;
    this.actors = parts.actors;
    this.projections = parts.projections;
    this.readModels = parts.readModels;
    this.maintenance = parts.maintenance;
    this.identity = parts.identity;
    this.recovery = parts.recovery;
    this.metrics = parts.metrics;
    this.log = parts.log;
  }

  /** Resolves once the runtime may admit work; on failure everything opened so far is closed again. */
  static async start<S = unknown>(opts: BerthRuntimeOptions<S>): Promise<BerthRuntime<S>> {
    const log = opts.logger ?? pino({ level: 'silent' });
    const { settings } = opts;
    const metrics = opts.metrics ?? new BerthMetrics();
    const store = new TimedEventStore(await openConfiguredStore(settings), metrics);
    const undo: (() => Promise<unknown> | unknown)[] = [() => store.close()];
    try {
      // Where another runtime answers comes from the runtimes model, which exists only once the projections do.
      let locate: ((runtimeId: string) => string | undefined) | undefined;
      const actors = new ActorRuntime<S>({
        store,
        runtimeId: opts.runtimeId,
        services: opts.services,
        logger: log,
        locate: (runtimeId) => locate?.(runtimeId),
      });
      for (const t of opts.actorTypes) actors.register(t);
      opts.onActors?.(actors);
      const identity = await fence(actors);
      log.info({ runtimeId: identity.runtimeId, epoch: identity.epoch, store: store.kind }, 'epoch fenced');

      const readModels = SqliteReadModelStore.open(join(settings.dataDir, 'projections.sqlite3'));
      undo.unshift(() => readModels.close());
      const projections = new ProjectionEngine({ store, models: readModels, logger: log });
      for (const p of opts.projections) projections.register(p);
      // The runtime's own models: recovery reads the first, so no composition can leave a start scanning the whole
      // log; the second says where the other runtimes sharing the store answer.
      const unfinished = projections.register(unfinishedActorsProjection);
      projections.register(runtimesProjection);
      await projections.start();
      undo.unshift(() => projections.stop());
      await projections.catchUp();
      log.info({ models: projections.models.length }, 'projections caught up');

      // The index of unfinished actors is caught up with the log: recovery reads exactly the work in flight. Should
      // that index have failed on an event, recovery scans the log instead: slower, never a work item missed.
      const recovery = await actors.recover(unfinished.error ? undefined : unfinished.query.streams(identity.runtimeId));
      log.info({ ...recovery }, 'recovery done');

      const runtimes = projections.get(runtimesProjection.name)!;
      locate = (runtimeId) => {
        const row = runtimes.error ? undefined : (runtimes.query.get(runtimeId) as RuntimeRow | undefined);
        // Only while that runtime may still answer there: the caller's token follows the URL (owner-url.ts).
        return ownerUrl(row);
      };

      const maintenance = new MaintenanceLoop({ intervalMs: settings.maintenanceMs, logger: log });
      for (const task of opts.maintenanceTasks ?? []) maintenance.add(task);
      // No effect stays stranded until the next restart: an actor whose effect's outcome was lost is reconciled.
      maintenance.add({ name: 'redrive-stranded-effects', run: async () => void (await actors.redriveStranded(STRANDED_AFTER_MS)) });
      maintenance.start();
      return new BerthRuntime({ store, actors, projections, readModels, maintenance, identity, recovery, metrics, log, shutdown: opts.shutdown });
    } catch (e) {
      opts.shutdown?.abort();
      for (const close of undo) await Promise.resolve().then(close).catch(() => undefined);
      throw e;
    }
  }

  /** Tells the runtimes sharing the store where this one answers (their owned_elsewhere answers point there). */
  async announce(url: string): Promise<void> {
    await recordRuntimeEvent(this.store, this.identity.runtimeId, RUNTIME_SERVING, { url }, this.identity.epoch);
  }

  /** The runtimes that share the store, as their own streams describe them. */
  runtimes(): RuntimeRow[] {
    return this.runtimesModel().query.all() as RuntimeRow[];
  }

  /**
   * Retires another runtime (issue #17): records it retired, then adopts every unfinished actor it owns at that
   * actor's exact revision (so it, if still alive, can append to none of them again) and reconciles them here.
   * Repeating it adopts what is left. The caller vouches that the actors' resources are reachable from here (a
   * Docker engine or a remote host both can reach, or native processes of this machine).
   */
  async retire(runtimeId: string): Promise<RecoveryReport & { adopted: number }> {
    if (runtimeId === this.identity.runtimeId) {
      throw new BerthError('invalid_request', 'A runtime cannot retire itself; retire it from another runtime.', { runtimeId });
    }
    if (!(await recordRuntimeEvent(this.store, runtimeId, RUNTIME_RETIRED, { by: this.identity.runtimeId }))) {
      throw new BerthError('not_found', 'No runtime with that id has used this store.', { runtimeId });
    }
    await this.projections.catchUp();
    const unfinished = this.projections.get(unfinishedActorsProjection.name)!;
    const owned = (unfinished.query.ownedBy(runtimeId) as UnfinishedActor[]).map((a) => a.stream);
    const report = await this.actors.adoptFrom(runtimeId, owned);
    this.log.warn({ runtimeId, ...report }, 'runtime retired; its unfinished actors adopted');
    return report;
  }

  private runtimesModel() {
    return this.projections.get(runtimesProjection.name)!;
  }

  /** Drains the maintenance loop, then in-flight commands and effects, then saves projections and closes the store. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      await this.maintenance.stop();
      this.shutdown?.abort();
      await this.actors.whenIdle();
      await recordRuntimeEvent(this.store, this.identity.runtimeId, RUNTIME_STOPPED, {}, this.identity.epoch).catch((err: unknown) =>
        this.log.warn({ err }, 'the stop could not be recorded in the runtime stream'),
      );
      await this.projections.stop();
      this.readModels.close();
      await this.store.close();
      this.log.info({ runtimeId: this.identity.runtimeId, epoch: this.identity.epoch }, 'runtime stopped');
    })();
    return this.stopping;
  }
}

async function fence(actors: ActorRuntime<any>): Promise<RuntimeIdentity> {
  try {
    return await actors.start();
  } catch (e) {
    if (!isBerthError(e, 'wrong_expected_version')) throw e;
    throw new BerthError(
      'unavailable',
      `another process started runtime ${actors.runtimeId} at the same moment; this one stands down`,
      { runtimeId: actors.runtimeId },
      { cause: e },
    );
  }
}
