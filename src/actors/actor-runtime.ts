/**
 * The event-sourced actor runtime (DESIGN §4): per-actor mailboxes; load (cache, else latest snapshot + later
 * events); validate; decide with the pure transition; append at the revision decided on; then run the yielded
 * actions as effects whose outcomes come back as events. Also epoch fencing, snapshots and recovery.
 *
 * An effect that returns several events has them decided one after another in one mailbox job and appended in one
 * store append (one transaction), each with its own revision and metadata; the effects of their transitions then
 * start in order. Every event is still durable before the effects it yields, at the cost of one write, not several.
 *
 * Effects run outside the mailbox, after their event is durable. An effect must turn its own failures into events
 * (`…failed`, or `…unknown` when it cannot tell whether it happened): an effect that throws is only logged, and
 * nothing is sent for it.
 */
import type { AnyMachineSnapshot, StateValue } from 'xstate';
import { pino } from 'pino';
import { BerthError, isBerthError } from '../../schemas/errors.ts';
import {
  isWrongExpectedVersion,
  type AppendResult,
  type EventData,
  type EventStore,
  type RecordedEvent,
} from '../store/event-store.ts';
import { hasSpentRetries } from '../store/retry-budget.ts';
import { ActorCache } from './actor-cache.ts';
import { RUNTIME_RECOVERED, type ActorType, type DomainEvent, type EffectContext, type RuntimeIdentity } from './actor-type.ts';
import { decide, isFinished } from './decide.ts';
import { fenceEpoch } from './epoch-fence.ts';
import { decisionEventId } from './event-id.ts';
import { schemaVersionOf, splitEvent, validateIncoming } from './event-codec.ts';
import { persist, stateLabel, type YieldedAction } from './machine-step.ts';
import { Mailboxes } from './mailbox.ts';
import { catchUp, rehydrate, streamOf, type LoadedActor } from './rehydrate.ts';
import { loadListed, scanUnfinished, streamResolver } from './recovery-scan.ts';
import { machineVersion } from './machine-version.ts';
import { ACTOR_ADOPTED, actorAdoptedSchema, mayWrite, ownedElsewhere } from './ownership.ts';
import { snapshotStreamOf, writeSnapshot } from './snapshot-stream.ts';

/** The pino methods the runtime uses; any pino logger fits. */
export interface ActorLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface ActorRuntimeOptions<S = unknown> {
  store: EventStore;
  /** Stable identity of this runtime; its epochs are fenced in `runtime-<runtimeId>`. */
  runtimeId: string;
  /** Write a snapshot after every N events of an actor (default 50; 0 never). */
  snapshotEvery?: number;
  /** Handed to every effect as `ctx.services` (providers, artifact store, ...). */
  services?: S;
  logger?: ActorLogger;
  /** How many times a command is re-decided after losing a concurrent append (default 5). */
  maxAttempts?: number;
  /** How many loaded actors stay in memory (default 20,000). */
  cacheSize?: number;
  /**
   * How long an append whose outcome is unknown is looked for in the log before the command fails `unavailable`
   * (default 15 s): found, its effects run; absent, nothing happened.
   */
  settleMs?: number;
  /** Where another runtime sharing the store answers, if known: an owned_elsewhere refusal names it. */
  locate?: (runtimeId: string) => string | undefined;
}

export interface SendOptions {
  /** Default: the new event's own id (it starts a chain). */
  correlationId?: string;
  /** Default: the new event's own id. Effects set it to the id of the event that caused them. */
  causationId?: string;
  /**
   * The event (one, accepted like any other) becomes the stream's first: every event before it and the actor's
   * snapshots are removed (EventStore.compactStream). For retention's summaries, which carry the whole record.
   */
  compact?: boolean;
}

/** What `send` resolves with, once the event is appended (effects may still be running). */
export interface SendResult<C = any> {
  eventId: string;
  revision: bigint;
  position: bigint;
  state: StateValue;
  context: C;
  snapshot: AnyMachineSnapshot;
}

export interface ActorView<C = any> {
  state: StateValue;
  context: C;
  /** The revision of the stream's last event. */
  revision: bigint;
  status: string;
  finished: boolean;
  /** The runtime that owns the actor (ownership.ts); undefined while no runtime has written it. */
  owner?: string;
  /** The epoch of the owner that wrote it last. */
  ownerEpoch?: number;
}

export interface RecoveryReport {
  /** Unfinished actors found (rehydrated, or failed). */
  actors: number;
  /** Those whose state accepted `runtime.recovered` (and so got it). */
  recovered: number;
  /** Those that could not be rehydrated (a corrupt event) or whose `runtime.recovered` failed; each is logged. */
  failed: number;
  ms: number;
}

const RESERVED_TYPES = new Set(['runtime', 'snapshot']);

/** The metadata every event the runtime writes carries: its writer, its chain, the transition it makes and when. */
function stamp(
  identity: RuntimeIdentity,
  actorType: ActorType,
  before: AnyMachineSnapshot,
  after: AnyMachineSnapshot,
  chain: { correlationId: string; causationId: string },
): Record<string, unknown> {
  return {
    runtimeId: identity.runtimeId,
    epoch: identity.epoch,
    ...chain,
    actorType: actorType.type,
    from: stateLabel(before.value),
    to: stateLabel(after.value),
    at: Date.now(),
    finished: isFinished(actorType, after),
  };
}

/** Errors of the store, not refusals by the actor: an outcome that met one is lost, and its actor stranded. */
const STORE_FAILURES = new Set<string>(['unavailable', 'wrong_expected_version', 'internal', 'corrupt_event']);

/** One accepted event of a command: what is appended, and the transition it makes. */
interface Step {
  stored: EventData;
  revision: bigint;
  next: AnyMachineSnapshot;
  actions: YieldedAction[];
}

export class ActorRuntime<S = unknown> {
  readonly runtimeId: string;
  /** Counters for tests, benchmarks and metrics. */
  readonly stats = { appended: 0, rejected: 0, wrongExpectedVersion: 0, effectsFailed: 0, snapshots: 0 };

  private readonly store: EventStore;
  private readonly snapshotEvery: number;
  private readonly services: S;
  private readonly logger: ActorLogger;
  private readonly maxAttempts: number;
  private readonly settleMs: number;
  private readonly locate: (runtimeId: string) => string | undefined;
  private readonly types = new Map<string, ActorType>();
  private readonly cache: ActorCache;
  private readonly mailboxes = new Mailboxes();
  /** Mailbox jobs, effects and snapshot writes under way: what `whenIdle` waits for. */
  private readonly inflight = new Set<Promise<unknown>>();
  /** Effects running per actor stream, so a re-drive never starts while the effect it would repeat still runs. */
  private readonly effectsRunning = new Map<string, number>();
  /**
   * Actors left waiting for an outcome nothing will record (an effect threw, its outcome could not be appended, or
   * an append that may have landed could not be settled), with when: `redriveStranded` reconciles them.
   */
  private readonly stranded = new Map<string, { actorType: ActorType; id: string; since: number }>();
  private identity: RuntimeIdentity | undefined;

  constructor(opts: ActorRuntimeOptions<S>) {
    this.store = opts.store;
    this.runtimeId = opts.runtimeId;
    this.snapshotEvery = opts.snapshotEvery ?? 50;
    this.services = opts.services as S;
    this.logger = opts.logger ?? pino({ name: 'berth-actors', level: 'warn' }, pino.destination(2));
    this.maxAttempts = opts.maxAttempts ?? 5;
    this.settleMs = opts.settleMs ?? 15_000;
    this.locate = opts.locate ?? (() => undefined);
    this.cache = new ActorCache(opts.cacheSize ?? 20_000);
  }

  register(actorType: ActorType<any, S>): this {
    if (!/^[a-z][a-z0-9-]*$/.test(actorType.type) || RESERVED_TYPES.has(actorType.type)) {
      throw new BerthError('internal', `"${actorType.type}" cannot name an actor type`, { actorType: actorType.type });
    }
    if (this.types.has(actorType.type)) {
      throw new BerthError('internal', `actor type ${actorType.type} is registered twice`, { actorType: actorType.type });
    }
    this.types.set(actorType.type, actorType);
    return this;
  }

  /** Fences a new epoch for this runtimeId; rejects with WrongExpectedVersion when another start won. */
  async start(): Promise<RuntimeIdentity> {
    const epoch = await fenceEpoch(this.store, this.runtimeId);
    this.identity = { runtimeId: this.runtimeId, epoch };
    return this.identity;
  }

  get epoch(): number {
    return this.started().epoch;
  }

  /**
   * Sends an event to an actor through its mailbox. Resolves once the event is appended; rejects with
   * `invalid_request` (schema), the actor type's rejection (state does not accept it; default `invalid_state`),
   * `wrong_expected_version` (lost every re-decision) or a store error. A refused event writes nothing.
   */
  send<C = any>(type: string, id: string, event: DomainEvent, opts: SendOptions = {}): Promise<SendResult<C>> {
    return this.enqueue(type, id, [event], opts, 'throw') as Promise<SendResult<C>>;
  }

  /**
   * Sends several events to one actor as one command: decided in order, appended in one write (all or none; the
   * first refusal rejects and writes nothing). Resolves like `send`, with the state after the last one.
   */
  sendAll<C = any>(type: string, id: string, events: DomainEvent[], opts: SendOptions = {}): Promise<SendResult<C>> {
    return this.enqueue(type, id, events, opts, 'throw') as Promise<SendResult<C>>;
  }

  /**
   * The actor's current state (caught up with its stream), or undefined when its stream does not exist. A cached
   * actor whose stream's revision has not moved (where the store can tell at once) is answered as it is, without a
   * read, when nothing is queued for it: an API call looks at four actors, each a read otherwise.
   */
  async get<C = any>(type: string, id: string): Promise<ActorView<C> | undefined> {
    const actorType = this.typeOf(type);
    const stream = this.streamFor(actorType, id);
    const cached = this.cache.get(stream);
    // The cached state is its stream's at `revision`: an unmoved revision means nothing was appended to it since (a
    // compaction appends its summary too; a dropped stream reads -1).
    const loaded = cached && this.mailboxes.idle(stream) && this.store.revisionNow?.(stream) === cached.revision
      ? cached
      : await this.track(
          this.mailboxes.post(stream, async () => {
            const actor = await catchUp(this.store, actorType, stream, await this.load(actorType, id, stream));
            this.cache.put(stream, actor);
            return actor;
          }),
        );
    if (loaded.revision < 0n) return undefined;
    const { snapshot } = loaded;
    return {
      state: snapshot.value,
      context: snapshot.context,
      revision: loaded.revision,
      status: snapshot.status,
      finished: isFinished(actorType, snapshot),
      owner: loaded.owner,
      ownerEpoch: loaded.ownerEpoch,
    };
  }

  /** Whether this runtime may write the actor seen (it owns it, or no runtime does). */
  owns(view: Pick<ActorView, 'owner' | 'ownerEpoch'>): boolean {
    return mayWrite(view, this.started());
  }

  /**
   * Refuses (owned_elsewhere) when another runtime owns the actor: for a command that starts work here on the
   * strength of it (an execution on an environment), which must go to its owner instead. `seen`: the caller's view
   * of it, when it has one (no second read).
   */
  async assertOwned(type: string, id: string, seen?: ActorView): Promise<void> {
    const view = seen ?? (await this.get(type, id));
    if (view && !this.owns(view)) throw ownedElsewhere(`${type}-${id}`, view, this.started(), this.locate(view.owner!));
  }

  /**
   * Takes over an actor owned by `from` (a retired runtime): appends `actor.adopted` at the stream's exact revision,
   * so `from`'s next append fails and it drops the actor without effects. Resolves true once this runtime owns it,
   * false when it is owned by neither (someone else adopted it first) or does not exist. Send `runtime.recovered`
   * afterwards to reconcile it.
   */
  adopt(type: string, id: string, from: string): Promise<boolean> {
    const actorType = this.typeOf(type);
    const stream = this.streamFor(actorType, id);
    const identity = this.started();
    return this.track(
      this.mailboxes.post(stream, async () => {
        let actor = await this.load(actorType, id, stream);
        for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
          actor = await catchUp(this.store, actorType, stream, actor);
          if (actor.owner === identity.runtimeId) return true;
          if (actor.revision < 0n || (actor.owner !== undefined && actor.owner !== from)) return false;
          const revision = actor.revision + 1n;
          const data = { ...(actor.owner ? { from: actor.owner } : {}), to: identity.runtimeId, epoch: identity.epoch, at: Date.now() };
          const id = decisionEventId(stream, revision, identity, ACTOR_ADOPTED, data);
          const stored: EventData = {
            id,
            type: ACTOR_ADOPTED,
            data: actorAdoptedSchema.parse(data),
            metadata: stamp(identity, actorType, actor.snapshot, actor.snapshot, { correlationId: id, causationId: id }),
          };
          try {
            await this.retryingUnknown(() => this.store.append(stream, [stored], { expectedRevision: actor.revision }));
          } catch (e) {
            this.cache.drop(stream);
            if (!isWrongExpectedVersion(e)) throw e;
            continue;
          }
          this.cache.put(stream, { snapshot: actor.snapshot, revision, owner: identity.runtimeId, ownerEpoch: identity.epoch });
          return true;
        }
        return false;
      }),
    );
  }

  /**
   * Rehydrates every unfinished actor of every registered type and sends `runtime.recovered` to each one whose state
   * accepts it. Which actors are unfinished comes from `unfinishedStreams` (an index the projection engine keeps, so
   * the cost follows the work in flight) or, without one, from a scan of the log. The machines answer with
   * inspection effects. An actor with a corrupt event is logged and counted as failed while the others are still
   * reconciled. Call after `start`, before admitting work.
   */
  async recover(unfinishedStreams?: readonly string[]): Promise<RecoveryReport> {
    const t0 = performance.now();
    const identity = this.started();
    const scan = unfinishedStreams
      ? await loadListed(this.store, this.types.values(), unfinishedStreams)
      : await scanUnfinished(this.store, this.types.values());
    for (const { stream, error } of scan.failed) {
      this.logger.error({ err: error, stream }, 'actor cannot be rehydrated; it is not reconciled');
    }
    // Another runtime's actors are its own to recover, even when they are listed (a shared store).
    const unfinished = scan.unfinished.filter((a) => {
      this.cache.put(a.stream, a.loaded);
      this.snapshotIfFolded(a.actorType, a.stream, a.loaded);
      return !isFinished(a.actorType, a.loaded.snapshot) && mayWrite(a.loaded, identity);
    });
    const recovered = this.recoveredEvent();
    let accepted = 0;
    let failed = scan.failed.length;
    // The store group-commits each window's appends together. What a send decided lives until that commit, so a
    // window of 1,024 made the GC copy and promote about twice the bytes 256 does, more than the 30 extra commits cost.
    const window = 256;
    for (let i = 0; i < unfinished.length; i += window) {
      await Promise.all(
        unfinished.slice(i, i + window).map(async (a) => {
          try {
            if (await this.enqueue(a.actorType.type, a.id, [recovered], {}, 'skip')) accepted++;
          } catch (err) {
            failed++;
            this.logger.error({ err, stream: a.stream }, 'runtime.recovered could not be delivered');
          }
        }),
      );
    }
    return { actors: unfinished.length + scan.failed.length, recovered: accepted, failed, ms: performance.now() - t0 };
  }

  /**
   * Takes over the listed actor streams that `from` (a retired runtime) owns, then reconciles them as a recovery
   * does: each adopted one whose state accepts `runtime.recovered` gets it, and its inspection effects run here.
   */
  async adoptFrom(from: string, streams: readonly string[]): Promise<RecoveryReport & { adopted: number }> {
    const resolve = streamResolver(this.types.values());
    const adopted: string[] = [];
    const window = 256;
    for (let i = 0; i < streams.length; i += window) {
      await Promise.all(
        streams.slice(i, i + window).map(async (stream) => {
          const r = resolve(stream);
          if (r && (await this.adopt(r.actorType.type, r.id, from))) adopted.push(stream);
        }),
      );
    }
    return { ...(await this.recover(adopted)), adopted: adopted.length };
  }

  /** Resolves when no mailbox job, effect or snapshot write is under way (including ones started meanwhile). */
  async whenIdle(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private enqueue(
    type: string,
    id: string,
    raw: DomainEvent[],
    opts: SendOptions,
    onReject: 'throw' | 'skip',
  ): Promise<SendResult | undefined> {
    try {
      const actorType = this.typeOf(type);
      const stream = this.streamFor(actorType, id);
      this.started();
      const events = raw.map((event) => validateIncoming(actorType, event));
      return this.track(this.mailboxes.post(stream, () => this.decideAndAppend(actorType, id, stream, events, opts, onReject)));
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * An effect's outcomes for its own actor, as one mailbox job and one append. Each event the actor's state refuses
   * (or that fails its schema) is logged and left out, as a refused single outcome is; the others still go in.
   */
  private sendOutcomes(actorType: ActorType, id: string, stream: string, events: DomainEvent[], opts: SendOptions, action: string) {
    const valid: DomainEvent[] = [];
    for (const event of events) {
      try {
        valid.push(validateIncoming(actorType, event));
      } catch (err) {
        this.logger.warn({ err, stream, action, event: event?.type }, 'an effect outcome was refused');
      }
    }
    if (valid.length === 0) return Promise.resolve(undefined);
    const refused = (err: unknown, event: DomainEvent) =>
      this.logger.warn({ err, stream, action, event: event.type }, 'an effect outcome was refused');
    return this.track(this.mailboxes.post(stream, () => this.decideAndAppend(actorType, id, stream, valid, opts, refused)));
  }

  /**
   * Decides `events` in order on the actor's current state and appends the accepted ones in one append at the
   * revision decided on; on a lost race, folds what the other writer appended and decides them all again. A refused
   * event throws (`send`), is skipped silently (`recover`), or is reported to a callback and left out (outcomes).
   */
  private async decideAndAppend(
    actorType: ActorType,
    id: string,
    stream: string,
    events: DomainEvent[],
    opts: SendOptions,
    onReject: 'throw' | 'skip' | ((error: unknown, event: DomainEvent) => void),
  ): Promise<SendResult | undefined> {
    const identity = this.started();
    // A cached actor (the usual case) is taken without a round trip through the async load.
    let actor = this.cache.get(stream) ?? (await this.load(actorType, id, stream));
    let lastConflict: unknown;
    for (let attempt = 0; attempt < this.maxAttempts; attempt++) {
      // Only the owner writes (ownership.ts): a lost race may have been an adoption, after which nothing is appended.
      if (!mayWrite(actor, identity)) {
        const error = ownedElsewhere(stream, actor, identity, this.locate(actor.owner!));
        if (onReject === 'throw') throw error;
        if (typeof onReject === 'function') for (const event of events) onReject(error, event);
        return undefined;
      }
      const steps: Step[] = [];
      const refused: [unknown, DomainEvent][] = [];
      let at = actor;
      for (const event of events) {
        const decision = decide(actorType, at.snapshot, event);
        if (!decision.accepted) {
          if (onReject === 'skip') continue;
          this.stats.rejected++;
          if (onReject === 'throw') throw decision.error;
          refused.push([decision.error, event]);
          continue;
        }
        const revision = at.revision + 1n;
        const { type, data } = splitEvent(event);
        const eventId = decisionEventId(stream, revision, identity, type, data);
        const stored: EventData = {
          id: eventId,
          type,
          data,
          metadata: {
            ...stamp(identity, actorType, at.snapshot, decision.next, {
              correlationId: opts.correlationId ?? eventId,
              causationId: opts.causationId ?? eventId,
            }),
            schemaVersion: schemaVersionOf(actorType, type),
            ...(opts.compact ? { compacted: true } : {}),
          },
        };
        steps.push({ stored, revision, next: decision.next, actions: decision.actions });
        at = { snapshot: decision.next, revision, owner: identity.runtimeId, ownerEpoch: identity.epoch };
      }
      if (typeof onReject === 'function') for (const [error, event] of refused) onReject(error, event);
      if (steps.length === 0) return undefined;
      let result: AppendResult;
      try {
        result = opts.compact
          ? await this.compact(stream, steps, actor.revision)
          : await this.retryingUnknown(() =>
              this.store.append(stream, steps.map((x) => x.stored), { expectedRevision: actor.revision < 0n ? 'no_stream' : actor.revision }),
            );
      } catch (e) {
        this.cache.drop(stream);
        // An append that may have landed is looked for in the log: if it did, it succeeded (and its effects run
        // below, never stranded); if another writer's events stand there, it lost a race.
        const settled =
          isBerthError(e, 'unavailable') && !opts.compact
            ? await this.settle(stream, steps, actor.revision, e).catch((unsettled: unknown) => {
                // It may have landed with nobody to run its effects: look again once the store answers.
                if (steps.some((x) => x.actions.length > 0)) this.strand(actorType, id, stream);
                throw unsettled;
              })
            : undefined;
        if (settled && settled !== 'lost') result = settled;
        else {
          if (!settled && !isWrongExpectedVersion(e)) throw e;
          // Another writer got there first: fold what it wrote and decide again on the new state.
          this.stats.wrongExpectedVersion++;
          lastConflict = e;
          actor = await catchUp(this.store, actorType, stream, actor);
          continue;
        }
      }
      this.stats.appended += steps.length;
      this.cache.put(stream, at);
      steps.forEach(({ stored, revision, actions }, i) => {
        const cause = {
          id: stored.id,
          type: stored.type,
          revision,
          correlationId: String(stored.metadata!.correlationId),
          followedBy: steps.slice(i + 1).map((later) => later.stored.type),
        };
        this.runEffects(actorType, id, stream, cause, actions);
      });
      this.maybeSnapshot(actorType, stream, actor.revision, at);
      const last = steps[steps.length - 1];
      return {
        eventId: last.stored.id,
        revision: last.revision,
        position: result.position,
        state: last.next.value,
        context: last.next.context,
        snapshot: last.next,
      };
    }
    throw lastConflict;
  }

  /**
   * An `unavailable` write may or may not have happened: it is repeated with the same ids and the same exact
   * expected revision, which the store recognises as already written if it was (DESIGN §3). Not when the store has
   * repeated it already (one retry budget per append, src/store/retry-budget.ts).
   */
  private async retryingUnknown<T>(write: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await write();
      } catch (e) {
        if (!isBerthError(e, 'unavailable') || hasSpentRetries(e) || attempt >= this.maxAttempts) throw e;
        await new Promise((r) => setTimeout(r, 50 * attempt));
      }
    }
  }

  /**
   * Where an append of unknown outcome stands, read back from the log until it answers (up to `settleMs`): the
   * append's result when its events are there (same ids, at the revisions decided on), `lost` when other events
   * are, and `unknownOutcome` rethrown when nothing is there (it did not happen) or the log never answered.
   */
  private async settle(stream: string, steps: Step[], revision: bigint, unknownOutcome: unknown): Promise<AppendResult | 'lost'> {
    const deadline = Date.now() + this.settleMs;
    for (let waitMs = 50; ; waitMs = Math.min(waitMs * 2, 1000)) {
      let found: RecordedEvent[];
      try {
        found = await this.store.readStream(stream, { from: revision + 1n, maxCount: steps.length });
      } catch (e) {
        if (isBerthError(e, 'not_found')) throw unknownOutcome;
        if (!isBerthError(e, 'unavailable') || Date.now() >= deadline) throw unknownOutcome;
        await new Promise((r) => setTimeout(r, waitMs));
        continue;
      }
      if (found.length === 0) throw unknownOutcome;
      const ours = found.length === steps.length && found.every((f, i) => f.id.toLowerCase() === steps[i].stored.id.toLowerCase());
      if (!ours) return 'lost';
      this.logger.warn({ stream, revision: String(revision + BigInt(steps.length)) }, 'an append of unknown outcome had landed; its effects run');
      return { nextRevision: found[found.length - 1].revision, position: found[found.length - 1].position };
    }
  }

  private compact(stream: string, steps: Step[], revision: bigint): Promise<AppendResult> {
    if (steps.length !== 1 || revision < 0n) {
      throw new BerthError('internal', `a compaction of ${stream} is one event on an existing stream`, { stream });
    }
    // Each of its steps is safe to repeat (EventStoreDB's are several calls, any of which may fail in passing).
    return this.retryingUnknown(() =>
      this.store.compactStream(stream, steps[0].stored, { expectedRevision: revision, dropStreams: [snapshotStreamOf(stream)] }),
    );
  }

  private async load(actorType: ActorType, id: string, stream: string): Promise<LoadedActor> {
    const cached = this.cache.get(stream);
    if (cached) return cached;
    const loaded = await rehydrate(this.store, actorType, id);
    this.cache.put(stream, loaded);
    this.snapshotIfFolded(actorType, stream, loaded);
    return loaded;
  }

  private runEffects(
    actorType: ActorType,
    id: string,
    stream: string,
    cause: EffectContext['cause'],
    actions: YieldedAction[],
  ): void {
    const runnable = actions.filter((a) => Object.hasOwn(actorType.effects, a.type));
    if (runnable.length === 0) return;
    const sendOptions: SendOptions = { correlationId: cause.correlationId, causationId: cause.id };
    const ctx: EffectContext<S> = {
      actorType: actorType.type,
      actorId: id,
      stream,
      runtime: this.started(),
      cause,
      services: this.services,
      send: async (type, actorId, event) => {
        await this.send(type, actorId, event, sendOptions);
      },
    };
    this.effectsRunning.set(stream, (this.effectsRunning.get(stream) ?? 0) + 1);
    const run = async () => {
      // Start after the caller's `send` has resolved: the effect never runs inside the mailbox job.
      await new Promise<void>((r) => setImmediate(r));
      for (const action of runnable) {
        let outcome: DomainEvent | DomainEvent[] | void;
        try {
          outcome = await actorType.effects[action.type](action.params, ctx);
        } catch (err) {
          this.stats.effectsFailed++;
          this.logger.error({ err, stream, action: action.type, cause: cause.id }, 'effect threw; nothing is sent for it');
          this.strand(actorType, id, stream);
          continue;
        }
        const events = outcome ? [outcome].flat() : [];
        try {
          if (events.length === 1) await ctx.send(actorType.type, id, events[0]);
          else if (events.length > 1) await this.sendOutcomes(actorType, id, stream, events, sendOptions, action.type);
        } catch (err) {
          this.logger.warn({ err, stream, action: action.type, events: events.map((e) => e.type) }, 'an effect outcome was not recorded');
          // A refusal means the actor moved on; a store that failed means the outcome is lost, not the actor's step.
          if (!isBerthError(err) || STORE_FAILURES.has(err.code)) this.strand(actorType, id, stream);
        }
      }
    };
    void this.track(
      run().finally(() => {
        const left = (this.effectsRunning.get(stream) ?? 1) - 1;
        if (left > 0) this.effectsRunning.set(stream, left);
        else this.effectsRunning.delete(stream);
      }),
    );
  }

  /** `runtime.recovered` from this runtime's current start. */
  private recoveredEvent(): DomainEvent {
    const { runtimeId, epoch } = this.started();
    return { type: RUNTIME_RECOVERED, runtimeId, epoch, at: Date.now() };
  }

  private strand(actorType: ActorType, id: string, stream: string): void {
    if (!this.stranded.has(stream)) this.stranded.set(stream, { actorType, id, since: Date.now() });
  }

  /**
   * Reconciles the actors stranded for at least `afterMs` whose effects are no longer running here: each gets
   * `runtime.recovered` (its inspection effects, never the original one), as after a restart. One that cannot be
   * reached yet (the store still fails) stays for the next call. Resolves with how many were sent it.
   */
  async redriveStranded(afterMs: number): Promise<number> {
    let sent = 0;
    for (const [stream, { actorType, id, since }] of this.stranded) {
      if (Date.now() - since < afterMs || this.effectsRunning.has(stream)) continue;
      try {
        this.cache.drop(stream); // whatever is in the log is what counts
        if (await this.enqueue(actorType.type, id, [this.recoveredEvent()], {}, 'skip')) sent++;
        this.stranded.delete(stream);
      } catch (err) {
        if (isBerthError(err, 'owned_elsewhere')) this.stranded.delete(stream);
        else this.logger.warn({ err, stream }, 'a stranded actor could not be reconciled yet');
      }
    }
    return sent;
  }

  /** Whether an effect of this actor is running in this process (a slow drain or save is not stalled). */
  effectRunning(actorType: string, id: string): boolean {
    return this.effectsRunning.has(`${actorType}-${id}`);
  }

  /** Snapshots the actor when the events after revision `from` (up to `actor.revision`) reached a multiple of N. */
  private maybeSnapshot(actorType: ActorType, stream: string, from: bigint, actor: LoadedActor): void {
    const every = BigInt(this.snapshotEvery);
    if (every <= 0n || (actor.revision + 1n) / every === (from + 1n) / every) return;
    this.snapshot(actorType, stream, actor);
  }

  /**
   * Snapshots a just loaded actor that folded N events or more past its snapshot: one of another machine version
   * (an upgrade, or the same sources compiled by tsc instead of esbuild) is not restored, and without a snapshot of
   * this version every later start folded a long-lived actor from its first event again (2.6 s and 70 MB more per
   * start at a million executions), until N new events of its own came.
   */
  private snapshotIfFolded(actorType: ActorType, stream: string, actor: LoadedActor): void {
    if (this.snapshotEvery > 0 && actor.base !== undefined && actor.revision - actor.base >= BigInt(this.snapshotEvery)) {
      this.snapshot(actorType, stream, actor);
    }
  }

  private snapshot(actorType: ActorType, stream: string, actor: LoadedActor): void {
    const write = writeSnapshot(this.store, stream, {
      revision: actor.revision,
      persisted: persist(actorType.machine, actor.snapshot),
      machine: machineVersion(actorType.machine),
      owner: actor.owner,
      ownerEpoch: actor.ownerEpoch,
    }).then(
      () => void this.stats.snapshots++,
      (err) => this.logger.warn({ err, stream }, 'snapshot not written (rehydration will fold more events)'),
    );
    void this.track(write);
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    const forget = () => void this.inflight.delete(p);
    p.then(forget, forget);
    return p;
  }

  private typeOf(type: string): ActorType {
    const t = this.types.get(type);
    if (!t) throw new BerthError('internal', `actor type ${type} is not registered`, { actorType: type });
    return t;
  }

  private streamFor(actorType: ActorType, id: string): string {
    if (typeof id !== 'string' || id === '') {
      throw new BerthError('invalid_request', `"${id}" is not a valid ${actorType.type} id`, { actorType: actorType.type });
    }
    return streamOf(actorType, id);
  }

  private started(): RuntimeIdentity {
    if (!this.identity) throw new BerthError('unavailable', `runtime ${this.runtimeId} has not started`);
    return this.identity;
  }
}
