/**
 * Leases for callers (issue 15, seed 003): bind a unit of work to a machine without allocating; acquire it lazily
 * (the lease's private environment is made at the first acquire, and its one allocation is the lease's machine, so
 * twenty concurrent acquires get one container and an unclear provider outcome is reconciled by the allocation, never
 * answered with a second machine); pause, hold and resume the work; reclaim the machine of a pause that outlasts the
 * idle interval (its workspace view saved first, by the allocation's release); release the lease.
 */
import { createHash } from 'node:crypto';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { PauseCause, Work } from '../../../schemas/events/lease.ts';
import { leaseKeySchema, workSchema } from '../../../schemas/events/lease.ts';
import { profileSchema, type Profile } from '../../../schemas/profile.ts';
import { assertQuota, type RolePolicy } from '../role-policy.ts';
import type { ActorRuntime, ActorView } from '../../actors/actor-runtime.ts';
import type { LeaseContext } from '../../machines/lease.machine.ts';
import { DEFAULT_IDLE_SECONDS, type AllocationContext } from '../../machines/allocation.machine.ts';
import type { LeaseEntry } from '../../projections/leases.projection.ts';
import type { Page } from '../../projections/projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import { assertCommandEnv } from '../../providers/command-env.ts';
import { crashAt } from '../../providers/crash-point.ts';
import { inScope, listedScope, type Caller } from '../caller.ts';
import { waitUntil } from '../environments/wait-until.ts';
import { listingOf, pageRange, type Listing, type PageQuery } from '../listing.ts';
import type { Counter } from 'prom-client';
import type { BerthMetrics } from '../core/metrics-registry.ts';

const LEASE_ID = /^hlse_[0-9a-f]{32}$/;
/** A refused spawn's pause is retried after this long, doubling per attempt up to the last. */
const SPAWN_RETRY_FIRST_MS = 5_000;
const SPAWN_RETRY_LAST_MS = 300_000;

export const leaseIdOf = (scope: string, key: string): string => `hlse_${createHash('sha256').update(`${scope}\0lease\0${key}`).digest('hex').slice(0, 32)}`;

export interface BindLeaseInput {
  key: string;
  work: Work;
  /** The profile of its machine, or an environment of the caller's scope whose profile it copies. */
  profile?: Partial<Profile>;
  environmentId?: string;
  workspaceId?: string;
  spawn?: { image?: string; env?: Record<string, string> };
  /** How long a pause may last before the machine is reclaimed (default: the profile's idleSeconds, else 300). */
  idleSeconds?: number;
}

export interface LeaseView {
  id: string;
  object: 'lease';
  key: string;
  work: Work;
  state: 'running' | 'paused' | 'held' | 'releasing' | 'released';
  environmentId: string | null;
  workspaceId: string | null;
  /** The session on the workspace that turns and commands of the lease use (with a workspace only). */
  sessionId: string | null;
  machine: { allocationId: string; generation: number } | null;
  pause: LeaseContext['pause'];
  idleSeconds: number;
  /** When the maintenance loop releases it (ms since the epoch), or null. */
  deadline: number | null;
  createdAt: number;
  updatedAt: number;
}

export interface LeaseTarget {
  lease: LeaseView;
  target: { environmentId: string; allocationId: string; generation: number };
  /** Whether the machine was there already (reused) or was made by this acquire. */
  reused: boolean;
}

/** What a lease needs of environments (EnvironmentService: named by shape, so this file does not import the API types). */
export interface LeaseEnvironments {
  create(caller: Caller, input: { name: string; description?: string; profile?: Partial<Profile> }): Promise<{ id: string }>;
  context(caller: Caller, id: string): Promise<{ profile: Profile }>;
  acquire(caller: Caller, id: string): Promise<{ allocationId: string; generation: number }>;
  release(caller: Caller, id: string, allocationId: string): Promise<{ state: string }>;
  delete(caller: Caller, id: string): Promise<void>;
  idOfSlug(scope: string, slug: string): string | undefined;
  /** The profile stored for the caller's ask: a member's is refused past the ceilings or uncontained, as at creation. */
  profileFor(caller: Caller, asked: Profile): Profile;
}

export interface LeaseServiceDeps {
  actors: ActorRuntime<any>;
  environments: LeaseEnvironments;
  leases: ReadModel;
  policy: RolePolicy;
  /** The caller's workspace (not_found otherwise): checked at bind. */
  workspace(caller: Caller, id: string): Promise<unknown>;
  /** Whether a turn holds the workspace's storage now (a paused lease's machine is not reclaimed under it). */
  turnHeld(workspaceId: string): Promise<boolean>;
  /** A session on the lease's environment and workspace (made with the private environment). */
  createSession(caller: Caller, input: { environmentId: string; workspaceId: string }): Promise<{ id: string }>;
  /** Where its resume counter is registered. */
  metrics: BerthMetrics;
  now: () => number;
}

export class LeaseService {
  /** One acquire (environment making, allocation) at a time per lease in this process: concurrent ones share it. */
  private readonly acquiring = new Map<string, Promise<LeaseTarget>>();
  /** Resumes by result: reuse or recreation of the machine, or a failed acquire. */
  private readonly resumes: Counter<'machine'>;

  constructor(private readonly deps: LeaseServiceDeps) {
    this.resumes = deps.metrics.counter({
      name: 'berth_lease_resumes_total',
      help: 'Resumes of paused leases at acquire, by machine reused, recreated, or failed.',
      labelNames: ['machine'],
    });
    for (const machine of ['reused', 'recreated', 'failed']) this.resumes.inc({ machine }, 0);
  }

  /** Idempotent per key: the same binding answers the lease; another one for a bound key is operation_conflict. */
  async bind(caller: Caller, input: BindLeaseInput): Promise<LeaseView> {
    const key = leaseKeySchema.safeParse(input.key);
    const work = workSchema.safeParse(input.work);
    if (!key.success || !work.success) throw new BerthError('invalid_request', 'A lease needs a key and a work {kind, id}.', { issues: [...(key.error?.issues ?? []), ...(work.error?.issues ?? [])] });
    if ((input.profile === undefined) === (input.environmentId === undefined)) {
      throw new BerthError('invalid_request', 'Name exactly one of profile or environmentId.', { reason: 'profile_or_environment' });
    }
    const base = input.environmentId !== undefined ? (await this.deps.environments.context(caller, input.environmentId)).profile : input.profile!;
    const asked = profileSchema.safeParse({ ...base, ...(input.spawn?.image !== undefined ? { image: input.spawn.image } : {}) });
    if (!asked.success) throw new BerthError('invalid_request', 'The profile is not valid.', { issues: asked.error.issues });
    // The member's limits apply when it binds (as when it creates an environment), not first at the acquire.
    const profile = this.deps.environments.profileFor(caller, asked.data);
    if (input.spawn?.env) assertCommandEnv(input.spawn.env);
    if (input.workspaceId !== undefined) await this.deps.workspace(caller, input.workspaceId);
    const id = leaseIdOf(caller.scope, input.key);
    const bound = {
      type: 'lease.bound',
      scope: caller.scope,
      role: caller.role,
      key: input.key,
      work: work.data,
      profile,
      ...(input.workspaceId !== undefined ? { workspaceId: input.workspaceId } : {}),
      ...(input.spawn?.env ? { env: input.spawn.env } : {}),
      idleSeconds: input.idleSeconds ?? profile.idleSeconds ?? DEFAULT_IDLE_SECONDS,
      at: this.deps.now(),
    };
    const existing = await this.deps.actors.get<LeaseContext>('lease', id);
    if (existing && existing.state !== 'unbound') return this.sameBinding(existing, bound);
    assertQuota(caller, 'leases', this.deps.policy.quotas.leases, this.deps.leases.query.count(caller.scope) as number);
    try {
      return viewOf(await this.deps.actors.send<LeaseContext>('lease', id, bound));
    } catch (e) {
      const now = await this.deps.actors.get<LeaseContext>('lease', id);
      if (isBerthError(e, 'invalid_state') && now) return this.sameBinding(now, bound);
      throw e;
    }
  }

  /** The variables every command of the lease gets (kept out of its view: they are the caller's own, maybe secret). */
  async envOf(caller: Caller, key: string): Promise<Record<string, string>> {
    return (await this.lease(caller, key)).context.env;
  }

  async get(caller: Caller, key: string): Promise<LeaseView> {
    return viewOf(await this.lease(caller, key));
  }

  async list(caller: Caller, query: PageQuery & { workKind?: string; workId?: string } = {}): Promise<Listing<LeaseView>> {
    const page = this.deps.leases.query.page(listedScope(caller), { kind: query.workKind, id: query.workId }, pageRange(query)) as Page<LeaseEntry>;
    const views = await Promise.all(page.rows.map((r) => this.deps.actors.get<LeaseContext>('lease', r.id)));
    return listingOf(page, views.filter((v): v is ActorView<LeaseContext> => v !== undefined).map(viewOf));
  }

  /**
   * The lease's machine, made if there is none (a paused lease is resumed first; a held one is refused). With
   * `suspend`, a spawn refused by a quota or policy pauses the lease with that cause and a retry time instead of
   * failing the work's step: the answer is then the paused lease (`invalid_state`, reason `paused`, detail.lease).
   */
  acquire(caller: Caller, key: string, opts: { suspend?: boolean } = {}): Promise<LeaseTarget> {
    const id = leaseIdOf(caller.scope, key);
    const running = this.acquiring.get(id);
    if (running) return running;
    const run = this.acquireOnce(caller, key, opts).finally(() => this.acquiring.delete(id));
    this.acquiring.set(id, run);
    return run;
  }

  async pause(caller: Caller, key: string, input: { cause: PauseCause; retryAt?: number }): Promise<LeaseView> {
    await this.lease(caller, key);
    return this.send(caller, key, { type: 'lease.paused', cause: input.cause, ...(input.retryAt !== undefined ? { retryAt: input.retryAt } : {}), at: this.deps.now() });
  }

  async hold(caller: Caller, key: string): Promise<LeaseView> {
    const lease = await this.lease(caller, key);
    if (lease.state === 'held') return viewOf(lease);
    return this.send(caller, key, { type: 'lease.held', at: this.deps.now() });
  }

  /** Ends the pause (a running lease answers as it is); its machine comes back at the next acquire, if it went. */
  async resume(caller: Caller, key: string, by: 'request' | 'timer' = 'request'): Promise<LeaseView> {
    const lease = await this.lease(caller, key);
    if (lease.state === 'running') return viewOf(lease);
    return this.send(caller, key, { type: 'lease.resumed', by, at: this.deps.now() });
  }

  /**
   * Sets the lease's deadline `timeoutMs` from now (null clears it): once it is due the maintenance loop releases the
   * lease, as `release` would. Recorded in the lease's stream, so a restart keeps it; a later call moves it.
   */
  async setTimeout(caller: Caller, key: string, timeoutMs: number | null): Promise<LeaseView> {
    await this.lease(caller, key);
    const at = this.deps.now();
    return this.send(caller, key, { type: 'lease.deadline_set', deadline: timeoutMs === null ? null : at + timeoutMs, at });
  }

  /** Removes the machine (the workspace view saved first) and the private environment, and ends the lease. */
  async release(caller: Caller, key: string): Promise<LeaseView> {
    const lease = await this.lease(caller, key);
    if (lease.state !== 'releasing' && lease.state !== 'released') await this.send(caller, key, { type: 'lease.release_requested', at: this.deps.now() });
    await this.settledRelease(lease.context.id);
    return viewOf((await this.deps.actors.get<LeaseContext>('lease', lease.context.id))!);
  }

  /**
   * What the maintenance loop does for paused and held leases: resume those whose timer is due (and acquire again
   * for a refused spawn), and reclaim the machine of those paused longer than their idle interval.
   */
  async tick(now: number): Promise<void> {
    for (const entry of this.deps.leases.query.due(now) as LeaseEntry[]) await this.releaseIfDue(entry.id, now);
    for (const entry of this.deps.leases.query.waiting() as LeaseEntry[]) {
      try {
        // As its binder: a member's lease retried by its timer stays under the member's quotas and ceilings.
        const caller: Caller = { scope: entry.scope, role: (await this.deps.actors.get<LeaseContext>('lease', entry.id))?.context.role ?? 'member' };
        if (entry.state === 'releasing') await this.finishRelease(entry.id);
        else if (entry.state === 'paused' && entry.retryAt !== null && entry.retryAt <= now) await this.retry(caller, entry.key);
        else if ((entry.state === 'paused' || entry.state === 'held') && entry.machine && entry.pausedAt !== null && now >= entry.pausedAt + entry.idleSeconds * 1000) {
          await this.reclaim(caller, entry.key);
        }
      } catch (e) {
        if (!isBerthError(e)) throw e; // the lease moved on meanwhile, or its machine is busy: the next tick looks again
      }
    }
  }

  /** Releases a lease whose deadline is due by its stream (the read model may not have seen a later deadline yet). */
  private async releaseIfDue(id: string, now: number): Promise<void> {
    const lease = await this.deps.actors.get<LeaseContext>('lease', id);
    const deadline = lease?.context.deadline ?? null;
    if (deadline === null || deadline > now || lease?.state === 'releasing' || lease?.state === 'released') return;
    await this.deps.actors.send('lease', id, { type: 'lease.release_requested', at: this.deps.now() }).catch((e) => {
      if (!isBerthError(e)) throw e; // released meanwhile: nothing left to do
    });
  }

  /** The effect of `lease.remove`: the private environment goes (releasing its allocation: views saved first). */
  async remove(scope: string, environmentId: string | null): Promise<void> {
    if (!environmentId) return;
    try {
      await this.deps.environments.delete({ scope, role: 'admin' }, environmentId);
    } catch (e) {
      if (!isBerthError(e, 'environment_not_found')) throw e;
    }
  }

  /** The release's removal (the effect's, or maintenance's when the effect ran before this service existed). */
  async finishRelease(leaseId: string): Promise<void> {
    const lease = await this.deps.actors.get<LeaseContext>('lease', leaseId);
    if (lease?.state !== 'releasing') return;
    await this.remove(lease.context.scope, lease.context.environmentId);
    await this.deps.actors.send('lease', leaseId, { type: 'lease.released', at: this.deps.now() }).catch((e) => {
      if (!isBerthError(e, 'invalid_state')) throw e;
    });
  }

  // ---- inside ----

  private async acquireOnce(caller: Caller, key: string, opts: { suspend?: boolean }): Promise<LeaseTarget> {
    let lease = await this.lease(caller, key);
    if (lease.state === 'held') throw new BerthError('invalid_state', 'A person holds the work: resume it first.', { key, reason: 'held', lease: viewOf(lease) });
    if (lease.state !== 'running' && lease.state !== 'paused') throw new BerthError('invalid_state', `The lease is ${String(lease.state)}.`, { key, reason: String(lease.state) });
    const wasPaused = lease.state === 'paused';
    try {
      const environmentId = lease.context.environmentId ?? (await this.makeEnvironment(caller, lease.context));
      const before = lease.context.machine;
      const allocation = await this.deps.environments.acquire(caller, environmentId);
      crashAt('lease.allocation-acquired'); // recovery tests: the machine exists, `lease.acquired` is not yet durable
      if (wasPaused) await this.resume(caller, key);
      if (before?.allocationId !== allocation.allocationId) {
        await this.send(caller, key, { type: 'lease.acquired', allocationId: allocation.allocationId, generation: allocation.generation, at: this.deps.now() });
      }
      const reused = before?.allocationId === allocation.allocationId;
      if (wasPaused) this.resumes.inc({ machine: reused ? 'reused' : 'recreated' });
      lease = await this.lease(caller, key);
      return { lease: viewOf(lease), target: { environmentId, allocationId: allocation.allocationId, generation: allocation.generation }, reused };
    } catch (e) {
      if (wasPaused) this.resumes.inc({ machine: 'failed' });
      if (!opts.suspend || !isSpawnRefusal(e)) throw e;
      // The step is not failed: the lease pauses with the refusal as its cause, and its timer retries the acquire.
      const attempt = lease.context.pauses + 1;
      const retryAt = this.deps.now() + Math.min(SPAWN_RETRY_FIRST_MS * 2 ** (attempt - 1), SPAWN_RETRY_LAST_MS);
      const paused = await this.send(caller, key, { type: 'lease.paused', cause: { kind: 'spawn_refused', message: (e as Error).message.slice(0, 1000) }, retryAt, at: this.deps.now() });
      throw new BerthError('invalid_state', 'The spawn was refused: the lease is paused until its retry time or a resume.', { key, reason: 'paused', cause: (e as BerthError).code, lease: paused });
    }
  }

  /** The lease's private environment (its name is derived from the lease, so a retried making finds the first). */
  private async makeEnvironment(caller: Caller, lease: LeaseContext): Promise<string> {
    const name = `lease-${lease.id.slice(5, 17)}`;
    // The binder's role, whoever asks: an admin's acquire of a member's lease does not lift the member's limits.
    const owner: Caller = { scope: lease.scope, role: lease.role };
    let environmentId: string;
    try {
      environmentId = (await this.deps.environments.create(owner, { name, description: `The machine of lease ${lease.key}`, profile: lease.profile })).id;
    } catch (e) {
      const found = isBerthError(e, 'environment_exists') ? this.deps.environments.idOfSlug(lease.scope, name) : undefined;
      if (!found) throw e;
      environmentId = found;
    }
    crashAt('lease.environment-created'); // recovery tests: the private environment exists, the lease does not name it
    const session = lease.workspaceId ? await this.deps.createSession(owner, { environmentId, workspaceId: lease.workspaceId }) : undefined;
    await this.send(owner, lease.key, { type: 'lease.environment_made', environmentId, ...(session ? { sessionId: session.id } : {}), at: this.deps.now() }).catch((e) => {
      if (!isBerthError(e, 'invalid_state')) throw e; // made by a concurrent acquire of another runtime: theirs stands
    });
    return (await this.deps.actors.get<LeaseContext>('lease', lease.id))!.context.environmentId!;
  }

  private async retry(caller: Caller, key: string): Promise<void> {
    const lease = await this.lease(caller, key);
    await this.resume(caller, key, 'timer');
    // A refused spawn is tried again at once (it pauses again, with the next attempt's time, if it is still refused).
    if (lease.context.pause?.cause.kind === 'spawn_refused') await this.acquire(caller, key, { suspend: true }).catch(() => undefined);
  }

  /** Releases the paused lease's machine (the allocation's release saves its views first); the lease stays. */
  private async reclaim(caller: Caller, key: string): Promise<void> {
    const lease = await this.lease(caller, key);
    const machine = lease.context.machine;
    if (!machine || !lease.context.environmentId) return;
    // Idle is no running execution (the release refuses those: environment_busy) and no held turn on its workspace.
    if (lease.context.workspaceId && (await this.deps.turnHeld(lease.context.workspaceId))) return;
    const allocation = await this.deps.actors.get<AllocationContext>('allocation', machine.allocationId);
    if (allocation && allocation.state !== 'released' && allocation.state !== 'failed') {
      const released = await this.deps.environments.release(caller, lease.context.environmentId, machine.allocationId);
      if (released.state !== 'released') return; // not confirmed yet: the next tick looks again
    }
    crashAt('lease.machine-released'); // recovery tests: the machine is gone, `lease.reclaimed` is not yet durable
    await this.send(caller, key, { type: 'lease.reclaimed', allocationId: machine.allocationId, at: this.deps.now() });
  }

  private async settledRelease(id: string): Promise<void> {
    await waitUntil(async () => (await this.deps.actors.get<LeaseContext>('lease', id))?.state === 'released', Date.now() + 120_000, 100);
  }

  private sameBinding(existing: ActorView<LeaseContext>, bound: { work: Work; workspaceId?: string }): LeaseView {
    const c = existing.context;
    if (c.work.kind !== bound.work.kind || c.work.id !== bound.work.id || (c.workspaceId ?? undefined) !== bound.workspaceId) {
      throw new BerthError('operation_conflict', 'The lease key is bound to other work.', { key: c.key, work: c.work });
    }
    return viewOf(existing);
  }

  private async send(caller: Caller, key: string, event: Record<string, unknown> & { type: string }): Promise<LeaseView> {
    return viewOf(await this.deps.actors.send<LeaseContext>('lease', leaseIdOf(caller.scope, key), event));
  }

  /** The caller's lease by key (not_found for another scope's: the id is derived from the caller's scope). */
  private async lease(caller: Caller, key: string): Promise<ActorView<LeaseContext>> {
    const id = leaseIdOf(caller.scope, key);
    const view = LEASE_ID.test(id) ? await this.deps.actors.get<LeaseContext>('lease', id) : undefined;
    if (!view || view.state === 'unbound' || !inScope(caller, view.context.scope)) throw new BerthError('not_found', 'No such lease.', { key });
    return view;
  }
}

/** A refusal of the spawn itself (a quota or a policy), as opposed to a fault: what a suspending acquire pauses for. */
const isSpawnRefusal = (e: unknown): boolean => isBerthError(e, 'quota_exceeded') || isBerthError(e, 'forbidden') || isBerthError(e, 'provider_unavailable');

const viewOf = (view: Pick<ActorView<LeaseContext>, 'state' | 'context'>): LeaseView => {
  const c = view.context;
  return {
    id: c.id,
    object: 'lease',
    key: c.key,
    work: c.work,
    state: String(view.state) as LeaseView['state'],
    environmentId: c.environmentId,
    workspaceId: c.workspaceId,
    sessionId: c.sessionId,
    machine: c.machine,
    pause: c.pause,
    idleSeconds: c.idleSeconds,
    deadline: c.deadline ?? null, // streams bound before deadlines existed have none

    createdAt: c.createdAt,
    updatedAt: c.updatedAt,
  };
};
