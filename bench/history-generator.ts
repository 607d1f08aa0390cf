/**
 * Writes the history a runtime leaves after N finished `true` executions (issue 12's history-scale bench): every event
 * is decided by the real actor types (validated, folded through the machines, ids, metadata and snapshots made as
 * the runtime makes them) and appended through SqliteEventStore's group commit; only the clock and the ids are chosen.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import type { ActorType, DomainEvent } from '../src/actors/actor-type.ts';
import { decide, isFinished } from '../src/actors/decide.ts';
import { schemaVersionOf, splitEvent, validateIncoming } from '../src/actors/event-codec.ts';
import { decisionEventId, nameUuid } from '../src/actors/event-id.ts';
import { persist, stateLabel } from '../src/actors/machine-step.ts';
import { machineVersion } from '../src/actors/machine-version.ts';
import { freshActor, streamOf, type LoadedActor } from '../src/actors/rehydrate.ts';
import { snapshotEvent } from '../src/actors/snapshot-stream.ts';
import { runtimeStreamOf } from '../src/actors/epoch-fence.ts';
import { RUNTIME_STARTED } from '../schemas/events/runtime.ts';
import { allocationActor } from '../src/runtime/environments/allocation.actor.ts';
import { environmentActor } from '../src/runtime/environments/environment.actor.ts';
import { executionActor } from '../src/runtime/executions/execution.actor.ts';
import { executionIdOf, inputDigestOf } from '../src/runtime/executions/execution-service.ts';
import { defaultRolePolicy } from '../src/runtime/role-policy.ts';
import type { EventData, ExpectedRevision } from '../src/store/event-store.ts';
import { SqliteEventStore } from '../src/store/sqlite-event-store.ts';

/** Bump when the generated history changes shape: the bench's cache directory is named after it. */
export const GENERATOR_VERSION = 2;

/** Tenants and their share of the executions; `default` is the admin token's scope (uncontained, as an admin's). */
export const TENANTS = [
  { scope: 'default', share: 0.4, member: false },
  { scope: 'acme', share: 0.3, member: true },
  { scope: 'globex', share: 0.2, member: true },
  { scope: 'initech', share: 0.1, member: true },
] as const;
const ENVIRONMENTS_PER_TENANT = 2;
/** The history spans this many days; each day the runtime restarts (new epoch) and every environment reallocates. */
const DAYS = 30;
/** Executions whose appends share one group commit. */
const CHUNK = 1000;
const SNAPSHOT_EVERY = 50n;
const DAY_MS = 86_400_000;
/** What the runtime writes for an empty output (and the artifact file every generated execution points to). */
const EMPTY_DIGEST = 'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

export interface GeneratedHistory {
  executions: number;
  events: number;
  runtimeId: string;
  /** An environment of the `default` scope, allocated at the end of the history, for the end-to-end run. */
  defaultEnvironment: string;
  executionsPerScope: Record<string, number>;
}

interface Append {
  stream: string;
  events: EventData[];
  expectedRevision: ExpectedRevision;
}

interface Decider {
  runtimeId: string;
  epoch: number;
}

interface Cause {
  correlationId: string;
  causationId: string;
}

/** One actor's stream, decided as ActorRuntime.decideAndAppend decides it, with a snapshot every 50 events. */
class ActorStream {
  readonly stream: string;
  private actor: LoadedActor;

  constructor(
    private readonly type: ActorType,
    readonly id: string,
  ) {
    this.stream = streamOf(type, id);
    this.actor = freshActor(type, id);
  }

  /** Decides `event` at time `at`; answers the append (and the snapshot append when one is due) and the event id. */
  decide(event: DomainEvent, decider: Decider, at: number, cause?: Cause): { appends: Append[]; eventId: string } {
    const incoming = validateIncoming(this.type, event);
    const decision = decide(this.type, this.actor.snapshot, incoming);
    if (!decision.accepted) throw decision.error;
    const from = this.actor.revision;
    const revision = from + 1n;
    const { type, data } = splitEvent(incoming);
    const eventId = decisionEventId(this.stream, revision, decider, type, data);
    const stored: EventData = {
      id: eventId,
      type,
      data,
      metadata: {
        runtimeId: decider.runtimeId,
        epoch: decider.epoch,
        correlationId: cause?.correlationId ?? eventId,
        causationId: cause?.causationId ?? eventId,
        actorType: this.type.type,
        from: stateLabel(this.actor.snapshot.value),
        to: stateLabel(decision.next.value),
        at,
        schemaVersion: schemaVersionOf(this.type, type),
        finished: isFinished(this.type, decision.next),
      },
    };
    this.actor = { snapshot: decision.next, revision };
    const appends: Append[] = [{ stream: this.stream, events: [stored], expectedRevision: from < 0n ? 'no_stream' : from }];
    if ((revision + 1n) / SNAPSHOT_EVERY !== (from + 1n) / SNAPSHOT_EVERY) {
      // With the machine's version and the owner (the last writer), as the runtime writes it: a snapshot without the
      // version is not trusted, and each start folded the 3,000-13,000 events of every live allocation again.
      const snapshot = snapshotEvent(this.stream, {
        revision,
        persisted: persist(this.type.machine, decision.next),
        machine: machineVersion(this.type.machine),
        owner: decider.runtimeId,
        ownerEpoch: decider.epoch,
      });
      appends.push({ stream: `snapshot-${this.stream}`, events: [snapshot], expectedRevision: 'any' });
    }
    return { appends, eventId };
  }
}

const hex32 = (name: string): string => createHash('sha256').update(name).digest('hex').slice(0, 32);

interface Environment {
  scope: string;
  profile: Record<string, unknown>;
  actor: ActorStream;
  allocation?: { actor: ActorStream; generation: number };
}

/** Writes the history into `dataDir` (events.sqlite3, runtime-id, the empty artifact); the directory must be new. */
export async function generateHistory(dataDir: string, executions: number, progress: (line: string) => void): Promise<GeneratedHistory> {
  mkdirSync(join(dataDir, 'artifacts', 'e3'), { recursive: true });
  writeFileSync(join(dataDir, 'artifacts', 'e3', EMPTY_DIGEST.slice('sha256:'.length)), '');
  const runtimeId = `rt_${hex32(`bench-history-${executions}`)}`;
  writeFileSync(join(dataDir, 'runtime-id'), `${runtimeId}\n`, { mode: 0o600 });
  const store = SqliteEventStore.open(join(dataDir, 'events.sqlite3'));
  const host = hostname();
  const startAt = Date.now() - DAYS * DAY_MS;
  let events = 0;
  let pending: Append[] = [];
  const queue = (appends: Append[]) => pending.push(...appends);
  const flush = async () => {
    const batch = pending;
    pending = [];
    events += batch.reduce((n, a) => n + a.events.length, 0);
    // Queued in one tick, so the store commits them in one transaction, in order (each stream's expected revision holds).
    await Promise.all(batch.map((a) => store.append(a.stream, a.events, { expectedRevision: a.expectedRevision })));
  };

  const environments: Environment[] = TENANTS.flatMap((t) =>
    Array.from({ length: ENVIRONMENTS_PER_TENANT }, (_, k) => ({
      scope: t.scope,
      // A member's host environment is always contained, under the default ceilings (what the service stores).
      profile: t.member ? { provider: 'native', memoryMb: 2048, cpus: 2, pidsLimit: 512, network: 'none', contain: true } : { provider: 'native' },
      actor: new ActorStream(environmentActor, `henv_${hex32(`${t.scope}/${k}`)}`),
    })),
  );
  const perScope: Record<string, number> = Object.fromEntries(TENANTS.map((t) => [t.scope, 0]));
  // Executions in time order; each scope's i-th execution goes to its environments in turn.
  const scopeOf = (i: number): string => {
    const x = (i % 1000) / 1000;
    let acc = 0;
    for (const t of TENANTS) if (x < (acc += t.share)) return t.scope;
    return TENANTS[TENANTS.length - 1].scope;
  };

  let decider: Decider = { runtimeId, epoch: 0 };
  const perDay = Math.ceil(executions / DAYS);
  const startDay = (day: number) => {
    const at = startAt + day * DAY_MS;
    decider = { runtimeId, epoch: day + 1 };
    queue([{
      stream: runtimeStreamOf(runtimeId),
      events: [{ id: randomUUID(), type: RUNTIME_STARTED, data: { epoch: decider.epoch, at, pid: 1000 + day, hostname: host } }],
      expectedRevision: day === 0 ? 'no_stream' : BigInt(day - 1),
    }]);
    for (const [k, env] of environments.entries()) {
      const t = at + 100 + k;
      if (day === 0) {
        const slug = `${env.scope}-env-${k % ENVIRONMENTS_PER_TENANT}`;
        queue(env.actor.decide({ type: 'environment.created', name: slug, slug, scope: env.scope, profile: env.profile, reuse: 'scope', at: t }, decider, t).appends);
      }
      if (env.allocation) {
        // The restarted runtime reconciles the unfinished actors, then the day's first use finds the allocation
        // released by its operator (explicit release) and acquires the next generation.
        const alloc = env.allocation.actor;
        for (const actor of [env.actor, alloc]) {
          const recovered = actor.decide({ type: 'runtime.recovered', runtimeId, epoch: decider.epoch, at: t }, decider, t);
          queue(recovered.appends);
          if (actor === alloc) {
            const cause = { correlationId: recovered.eventId, causationId: recovered.eventId };
            queue(alloc.decide({ type: 'allocation.reported', report: { status: 'ready', identity: { provider: 'native', resourceId: host } }, at: t }, decider, t, cause).appends);
          }
        }
        const requested = alloc.decide({ type: 'allocation.release_requested', reason: 'explicit', at: t + 1 }, decider, t + 1);
        queue(requested.appends);
        const cause = { correlationId: requested.eventId, causationId: requested.eventId };
        const deallocated = alloc.decide({ type: 'allocation.deallocated', result: 'terminated', at: t + 2 }, decider, t + 2, cause);
        queue(deallocated.appends);
        queue(env.actor.decide({ type: 'environment.allocation_releasing', allocationId: alloc.id, at: t + 1 }, decider, t + 2, cause).appends);
        queue(env.actor.decide({ type: 'environment.allocation_released', allocationId: alloc.id, at: t + 2 }, decider, t + 3, {
          correlationId: requested.eventId,
          causationId: deallocated.eventId,
        }).appends);
      }
      const generation = (env.allocation?.generation ?? 0) + 1;
      const allocationId = `halloc_${nameUuid(`${env.actor.id}/${generation}`)}`;
      const requestId = `hreq_${nameUuid(`${allocationId}/request`)}`;
      const acquire = env.actor.decide({ type: 'environment.acquisition_requested', allocationId, requestId, generation, at: t + 4 }, decider, t + 4);
      queue(acquire.appends);
      const alloc = new ActorStream(allocationActor, allocationId);
      const cause = { correlationId: acquire.eventId, causationId: acquire.eventId };
      const intended = alloc.decide(
        { type: 'allocation.intended', environmentId: env.actor.id, requestId, generation, profile: env.profile, ownership: 'borrowed', at: t + 5 },
        decider,
        t + 5,
        cause,
      );
      queue(intended.appends);
      const reported = alloc.decide(
        { type: 'allocation.reported', report: { status: 'ready', identity: { provider: 'native', resourceId: host } }, at: t + 6 },
        decider,
        t + 6,
        { correlationId: acquire.eventId, causationId: intended.eventId },
      );
      queue(reported.appends);
      queue(env.actor.decide({ type: 'environment.allocated', allocationId, generation, at: t + 6 }, decider, t + 7, {
        correlationId: acquire.eventId,
        causationId: reported.eventId,
      }).appends);
      env.allocation = { actor: alloc, generation };
    }
  };

  /** One `true`, from the use that pins the allocation to the use given back, as the execution service writes it. */
  const execute = (i: number, at: number) => {
    const scope = scopeOf(i);
    const n = perScope[scope]++;
    const envs = environments.filter((e) => e.scope === scope);
    const env = envs[n % envs.length];
    const alloc = env.allocation!;
    const operationId = `history-${i}`;
    const id = executionIdOf(scope, operationId);
    const target = { environmentId: env.actor.id, allocationId: alloc.actor.id, generation: alloc.generation };
    const exec = new ActorStream(executionActor, id);
    const use = alloc.actor.decide({ type: 'allocation.use_acquired', useId: id, kind: 'execution', at }, decider, at + 1);
    queue(use.appends);
    const member = TENANTS.find((t) => t.scope === scope)!.member;
    queue(exec.decide({
      type: 'execution.accepted',
      operationId,
      inputDigest: inputDigestOf(env.actor.id, { operationId, environment: env.actor.id, command: ['true'] }),
      environmentId: env.actor.id,
      target,
      command: ['true'],
      stdin: false,
      ...(member ? { outputLimitBytes: defaultRolePolicy.quotas.outputBytes } : {}),
      scope,
      at,
    }, decider, at + 1).appends);
    const dispatched = exec.decide({ type: 'execution.dispatched', at }, decider, at + 1);
    queue(dispatched.appends);
    // The executor's reports follow the dispatch; each is caused by the one before it.
    let causationId = dispatched.eventId;
    const report = (event: DomainEvent, t: number) => {
      const r = exec.decide(event, decider, t, { correlationId: dispatched.eventId, causationId });
      queue(r.appends);
      causationId = r.eventId;
    };
    report({ type: 'execution.started', pid: 2000 + (i % 4_000_000), at: at + 20 }, at + 40);
    report({ type: 'execution.exited', exitCode: 0, signal: null, at: at + 25 }, at + 45);
    report({ type: 'execution.drained', sizes: { stdout: 0, stderr: 0, pty: 0 }, at: at + 30 }, at + 46);
    report({ type: 'execution.saved', artifacts: { stdout: { digest: EMPTY_DIGEST, size: 0 }, stderr: { digest: EMPTY_DIGEST, size: 0 } }, at: at + 50 }, at + 51);
    const release = { correlationId: dispatched.eventId, causationId: nameUuid(`${id}/release`) };
    queue(alloc.actor.decide({ type: 'allocation.use_released', useId: id, at: at + 55 }, decider, at + 56, release).appends);
    queue(exec.decide({ type: 'execution.released', at: at + 56 }, decider, at + 57, release).appends);
  };

  const began = performance.now();
  for (let i = 0; i < executions; i++) {
    const day = Math.floor(i / perDay);
    if (i % perDay === 0) startDay(day);
    // Spread over the day's working part, a few ms apart at the least.
    execute(i, startAt + day * DAY_MS + 1000 + Math.floor(((i % perDay) * (DAY_MS - 3_600_000)) / perDay));
    if ((i + 1) % CHUNK === 0 || i === executions - 1) await flush();
    if ((i + 1) % 50_000 === 0) progress(`generated ${i + 1} executions (${events} events) in ${((performance.now() - began) / 1000).toFixed(0)} s`);
  }
  await store.close();
  return {
    executions,
    events,
    runtimeId,
    defaultEnvironment: environments.find((e) => e.scope === 'default')!.actor.id,
    executionsPerScope: perScope,
  };
}
