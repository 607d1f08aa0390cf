/**
 * Environments for callers: create/list/get/update/delete in a scope, and acquire/release of their allocation.
 * Acquisition coalesces: whoever finds the environment idle requests the next generation; every other caller (or a
 * request that lost the race) waits for the same allocation. Selecting an environment never allocates.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import { profileSchema, type Profile, type ReusePolicy } from '../../../schemas/profile.ts';
import type { UseKind } from '../../../schemas/events/allocation.ts';
import { terminalStatuses } from '../../../schemas/states.ts';
import type { ActorRuntime, ActorView } from '../../actors/actor-runtime.ts';
import type { AllocationContext } from '../../machines/allocation.machine.ts';
import type { EnvironmentContext } from '../../machines/environment.machine.ts';
import { executionStatus, type ExecutionContext } from '../../machines/execution.machine.ts';
import type { Page } from '../../projections/projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import type { ActiveAllocation } from '../../projections/active-allocations.projection.ts';
import type { CatalogEntry } from '../../projections/catalog.projection.ts';
import type { ProviderRegistry } from '../provider-registry.ts';
import { assertQuota, assertWithinPolicy, effectiveProfile, type RolePolicy } from '../role-policy.ts';
import { environmentView, type EnvironmentContentFields } from './environment-view.ts';
import type { AllocationView, Caller, CreateEnvironmentInput, EnvironmentView } from '../runtime-api.ts';
import { inScope, listedScope } from '../caller.ts';
import { listingOf, pageRange, type Listing, type PageQuery } from '../listing.ts';
import { waitUntil } from './wait-until.ts';
import type { PoolService, RebindOutcome } from '../pools/pool-service.ts';

/** How long an acquire waits for an allocation under way before answering `unavailable`. */
const ACQUIRE_TIMEOUT_MS = 180_000;
/** Waiters poll the actors (two cached reads) at most this far apart: the wait adds little to an allocation. */
const ACQUIRE_POLL_MAX_MS = 8;
/** How long a release (or an acquire replacing an allocation bound to an old version) waits for finished executions to give their uses back. */
export const FINISHING_USES_WAIT_MS = 10_000;
/** How long a release waits for the provider to confirm termination. */
const RELEASE_TIMEOUT_MS = 120_000;
/** How many times a delete releases an allocation that concurrent acquires keep making before it gives up (busy). */
const DELETE_ATTEMPTS = 3;
const ENVIRONMENT_ID = /^henv_[0-9a-f]{32}$/;
/** How long a read waits for the read models to reach the log's head before answering `unavailable`. */
const READ_WAIT_MS = 10_000;

export const slugOf = (name: string): string =>
  name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 64)
    .replace(/-+$/, '');

export const newEnvironmentId = (): string => `henv_${randomBytes(16).toString('hex')}`;

export interface EnvironmentServiceDeps {
  actors: ActorRuntime<any>;
  providers: ProviderRegistry;
  /** Environment objects are read from here and the allocation index, never from the actors. */
  catalog: ReadModel;
  /** The active-allocation index: the state of each environment's allocation. */
  allocations: ReadModel;
  /** The event log's head position (read-your-writes: reads wait until the read models reach it). */
  head: () => Promise<bigint>;
  now: () => number;
  /** The content fields (status, versions, files…) of each environment object, when the content chapter is on. */
  describeContent?: (entries: CatalogEntry[]) => Promise<EnvironmentContentFields[]>;
  /** What members may ask for: profile ceilings, contained host commands, the environments quota. */
  policy: RolePolicy;
  /** Warm pools (src/runtime/pools): an acquire whose profile a pool fits claims a ready allocation of it. */
  pools?: Pick<PoolService, 'claim'>;
}

export class EnvironmentService {
  /** Creates in one scope are serialised so two cannot take one slug (the catalog is read after each write). */
  private creating: Promise<unknown> = Promise.resolve();

  constructor(private readonly deps: EnvironmentServiceDeps) {}

  async create(caller: Caller, input: CreateEnvironmentInput): Promise<EnvironmentView> {
    const slug = slugOf(input.name ?? '');
    if (!slug) throw new BerthError('environment_invalid', 'The name yields no path segment for /env/<slug>.', { name: input.name });
    const parsed = profileSchema.safeParse(input.profile ?? {});
    if (!parsed.success) {
      throw new BerthError('invalid_request', 'The profile is not valid.', { issues: parsed.error.issues });
    }
    const profile = this.profileFor(caller, parsed.data);
    const run = this.creating.then(async () => {
      if (this.deps.catalog.query.bySlug(caller.scope, slug)) {
        throw new BerthError('environment_exists', `An environment of this scope already has the slug "${slug}".`, { slug });
      }
      // Creates are serialised and each waits for the catalog to show it: the count includes every earlier one.
      assertQuota(caller, 'environments', this.deps.policy.quotas.environments, this.deps.catalog.query.count(caller.scope) as number);
      const id = newEnvironmentId();
      const sent = await this.deps.actors.send('environment', id, {
        type: 'environment.created',
        name: input.name.trim(),
        slug,
        scope: caller.scope,
        profile,
        reuse: this.reusePolicyOf(profile),
        ...(input.description !== undefined ? { description: input.description } : {}),
        ...(input.entry !== undefined ? { entry: input.entry } : {}),
        at: this.deps.now(),
      });
      await this.deps.catalog.waitFor(sent.position, 10_000);
      return this.get(caller, id);
    });
    this.creating = run.catch(() => undefined);
    return run;
  }

  /** The id of `scope`'s environment with that slug, if there is one. */
  idOfSlug(scope: string, slug: string): string | undefined {
    return (this.deps.catalog.query.bySlug(scope, slug) as { id: string } | undefined)?.id;
  }

  /**
   * The environment a caller names: an id as it is, else a name or slug of the caller's own scope (a name compares by
   * the slug it gives, which is unique in a scope). A name unknown in that scope, another tenant's included, is
   * environment_not_found, the same answer whether or not another scope has that name.
   */
  async resolve(caller: Caller, ref: string): Promise<string> {
    if (ENVIRONMENT_ID.test(ref)) return ref;
    await this.readModelsCaughtUp();
    const id = this.idOfSlug(caller.scope, slugOf(ref));
    if (!id) throw new BerthError('environment_not_found', `No environment is named "${ref}".`, { name: ref });
    return id;
  }

  /** One page of the caller's environments (every scope's for the admin of `*`), from the read models. */
  async list(caller: Caller, query?: PageQuery): Promise<Listing<EnvironmentView>> {
    const range = pageRange(query);
    await this.readModelsCaughtUp();
    const page = this.deps.catalog.query.page(listedScope(caller), range) as Page<CatalogEntry>;
    return listingOf(page, await this.render(page.rows));
  }

  async get(caller: Caller, id: string): Promise<EnvironmentView> {
    await this.readModelsCaughtUp();
    const entry = ENVIRONMENT_ID.test(id) ? (this.deps.catalog.query.get(id) as CatalogEntry | undefined) : undefined;
    if (!entry || !inScope(caller, entry.scope)) {
      throw new BerthError('environment_not_found', 'No such environment.', { environmentId: id });
    }
    return (await this.render([entry]))[0];
  }

  /**
   * Read-your-writes: waits until the catalog and the allocation index reflect every event appended before this
   * call (by this runtime or another), so a caller that has just created, changed or acquired an environment sees it.
   * Caught up (the usual case), it costs one head read.
   */
  private async readModelsCaughtUp(): Promise<void> {
    const head = await this.deps.head();
    for (const model of [this.deps.catalog, this.deps.allocations]) {
      if (!(await model.waitFor(head, READ_WAIT_MS))) {
        throw new BerthError('unavailable', 'The environment catalog is behind the event log; retry shortly.', {
          readModel: model.name,
          position: head.toString(),
        });
      }
    }
  }

  /**
   * The environment objects of catalog entries. What is not in the read models is gathered for all of them at once
   * (one availability check per provider backend, the kept content summaries), then each object is built without a
   * promise of its own.
   */
  private async render(entries: CatalogEntry[]): Promise<EnvironmentView[]> {
    const backends = new Map<string, Profile>();
    for (const e of entries) backends.set(this.backendKey(e.profile), e.profile);
    const [available, allocationStates, content] = await Promise.all([
      Promise.all([...backends].map(async ([key, profile]) => [key, await this.availability(profile)] as const)),
      this.allocationStates(entries),
      this.deps.describeContent?.(entries),
    ]);
    const availability = new Map(available);
    return entries.map((e, i) =>
      environmentView(e, { availability: availability.get(this.backendKey(e.profile))!, allocationState: allocationStates[i], content: content?.[i] }),
    );
  }

  /**
   * The state of each entry's allocation, from the index; one that has left it (released or failed, its environment
   * not told yet: rare and brief) from its actor.
   */
  private async allocationStates(entries: CatalogEntry[]): Promise<(string | undefined)[]> {
    const states: (string | undefined)[] = [];
    const unindexed: Promise<void>[] = [];
    for (const [i, { allocationId }] of entries.entries()) {
      states[i] = allocationId === null ? undefined : (this.deps.allocations.query.get(allocationId) as ActiveAllocation | undefined)?.state;
      if (allocationId === null || states[i] !== undefined) continue;
      unindexed.push(
        this.deps.actors.get<AllocationContext>('allocation', allocationId).then((actor) => {
          states[i] = actor ? String(actor.state) : undefined;
        }),
      );
    }
    await Promise.all(unindexed);
    return states;
  }

  async update(caller: Caller, id: string, patch: Partial<CreateEnvironmentInput>): Promise<EnvironmentView> {
    const ctx = await this.context(caller, id);
    const event: Record<string, unknown> = { type: 'environment.updated', at: this.deps.now() };
    if (patch.name !== undefined) {
      const slug = slugOf(patch.name);
      if (!slug) throw new BerthError('environment_invalid', 'The name yields no path segment for /env/<slug>.', { name: patch.name });
      const other = this.deps.catalog.query.bySlug(caller.scope, slug) as CatalogEntry | undefined;
      if (other && other.id !== id) throw new BerthError('environment_exists', `An environment of this scope already has the slug "${slug}".`, { slug });
      Object.assign(event, { name: patch.name.trim(), slug });
    }
    if (patch.description !== undefined) event.description = patch.description;
    if (patch.entry !== undefined) event.entry = patch.entry;
    if (patch.profile !== undefined) {
      const parsed = profileSchema.safeParse({ ...ctx.profile, ...patch.profile });
      if (!parsed.success) throw new BerthError('invalid_request', 'The profile is not valid.', { issues: parsed.error.issues });
      const profile = this.profileFor(caller, parsed.data);
      Object.assign(event, { profile, reuse: this.reusePolicyOf(profile) });
    }
    const sent = await this.deps.actors.send('environment', id, event as { type: string });
    await this.deps.catalog.waitFor(sent.position, 10_000);
    return this.get(caller, id);
  }

  /**
   * Deletes the environment (seed 001 §DELETE): refused with `environment_busy` while a build runs or a use holds its
   * allocation. An idle allocation is released first by the same path as `release` (physically removed and
   * confirmed), and an acquisition or release under way is waited for; a release the provider cannot confirm keeps
   * the environment (`unavailable`), so nothing it made is left without an owner.
   */
  async delete(caller: Caller, id: string): Promise<void> {
    const deadline = Date.now() + RELEASE_TIMEOUT_MS;
    for (let attempt = 1; ; attempt++) {
      const { state, context: env } = await this.view(caller, id);
      const a = env.acquisition;
      // During a build the environment refuses the delete itself, allocation or not: nothing is released for it.
      if (a && env.building === null && attempt <= DELETE_ATTEMPTS) {
        if (state === 'acquiring' || state === 'releasing') {
          await this.waitForAllocation(id, state, a.allocationId, deadline);
          continue;
        }
        if (state === 'allocated') {
          const released = await this.release(caller, id, a.allocationId);
          if (released.state !== 'released') {
            throw new BerthError('unavailable', 'The provider has not confirmed the release of the allocation; the environment is kept until it does.', {
              environmentId: id,
              allocationId: a.allocationId,
              state: released.state,
            });
          }
          continue;
        }
      }
      const sent = await this.deps.actors.send('environment', id, { type: 'environment.deleted', at: this.deps.now() });
      await this.deps.catalog.waitFor(sent.position, 10_000);
      return;
    }
  }

  /**
   * The environment's ready allocation, allocating it first if there is none. Coalesced: whoever finds the
   * environment idle (or its allocation lost) requests the next generation; everyone else, and a request that lost
   * that race, waits for the allocation under way. Answers `unavailable` when the provider cannot tell whether it
   * exists, and `environment_invalid` when the provider refused the profile. A Docker allocation bound to a content
   * version that is no longer active is replaced by one bound to the active version when it is free (replaceStaleVersion).
   */
  async acquire(caller: Caller, id: string): Promise<AllocationView> {
    const deadline = Date.now() + ACQUIRE_TIMEOUT_MS;
    // An acquisition already under way when this call began (perhaps from before a restart): if recovery finds it
    // never happened, this call requests its own instead of failing.
    let inherited: string | undefined;
    let replaced = false;
    for (let first = true; ; first = false) {
      const { state, context: env } = await this.view(caller, id);
      const a = env.acquisition;
      if (a && state === 'allocated') {
        // Once per call: a version activated again meanwhile waits for the next acquire.
        if (!replaced && (await this.replaceStaleVersion(caller, env, a.allocationId))) {
          replaced = true;
          continue;
        }
        return this.allocationView(a.allocationId);
      }
      if (state === 'idle' || state === 'lost') {
        this.deps.providers.get(env.profile.provider);
        if (a && (await this.clearFenced(caller, id, a.allocationId))) continue;
        if (await this.claimPooled(id, env, deadline)) continue;
        try {
          await this.deps.actors.send('environment', id, {
            type: 'environment.acquisition_requested',
            allocationId: `halloc_${randomUUID()}`,
            requestId: `hreq_${randomUUID()}`,
            generation: env.generation + 1,
            at: this.deps.now(),
          });
        } catch (e) {
          // Another caller requested first: wait for its allocation like everyone else.
          if (!isBerthError(e, 'environment_busy') && !isBerthError(e, 'invalid_state')) throw e;
        }
        continue;
      }
      if (!a) throw new BerthError('internal', `The environment is ${String(state)} without an allocation.`, { environmentId: id });
      if (first) inherited = a.allocationId;
      const failure = await this.waitForAllocation(id, String(state), a.allocationId, deadline);
      if (!failure) continue;
      if (a.allocationId !== inherited || failure.code !== 'unavailable') throw failure;
      inherited = undefined;
    }
  }

  /**
   * Claims a warm pool's ready allocation when a pool fits the profile: the environment asks for it as its next
   * generation (`pooled`), and the effect of that rebinds it (allocation.claimed) and shows it the active content
   * version (pools/pool-claim.ts). True when one was claimed.
   */
  private async claimPooled(id: string, env: EnvironmentContext, deadline: number): Promise<boolean> {
    const { pools, actors } = this.deps;
    if (!pools) return false;
    const rebind = async (c: { allocationId: string; requestId: string }): Promise<RebindOutcome> => {
      const now = await actors.get<EnvironmentContext>('environment', id);
      if (now?.state !== 'idle' && now?.state !== 'lost') return 'unused';
      try {
        const { generation } = now.context;
        const request = { type: 'environment.acquisition_requested', ...c, generation: generation + 1, pooled: true, at: this.deps.now() };
        await actors.send('environment', id, request);
      } catch (e) {
        // Another caller requested first: this allocation stays in the pool.
        if (isBerthError(e, 'environment_busy') || isBerthError(e, 'invalid_state')) return 'unused';
        throw e;
      }
      let after: Awaited<ReturnType<typeof actors.get<EnvironmentContext>>>;
      const settled = async () => {
        after = await actors.get<EnvironmentContext>('environment', id);
        return after?.state !== 'acquiring' || after.context.acquisition?.allocationId !== c.allocationId;
      };
      // Polled like any acquisition under way (a stalled claim must not read the actor every millisecond until the deadline).
      await waitUntil(settled, deadline, ACQUIRE_POLL_MAX_MS);
      return after?.state === 'allocated' && after.context.acquisition?.allocationId === c.allocationId ? 'claimed' : 'refused';
    };
    const withContent = env.activeVersion !== null && this.deps.describeContent !== undefined && this.bindsContentAtAllocation(env.profile);
    return (await pools.claim(env.profile, rebind, withContent)) !== undefined;
  }

  /**
   * An allocation whose provider binds content at allocation (a running container cannot gain mounts) keeps the
   * version that was active when it was made. When another version is active now, the allocation is released so the
   * next one binds it: at once when it has no uses, after a short wait when its only uses are executions that already
   * finished (they give their use back in moments). While anything else holds it (a running execution, a mount), it
   * is kept: executions keep reading its version, and their records name that one (`versionRead`). True when it was
   * released.
   */
  private async replaceStaleVersion(caller: Caller, env: EnvironmentContext, allocationId: string): Promise<boolean> {
    // describeContent is there exactly when the content chapter is on, i.e. when intents bind versions at all.
    if (!this.deps.describeContent || !this.bindsContentAtAllocation(env.profile)) return false;
    const bound = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
    if (!bound || !isStale(bound.context, env)) return false;
    if (!(await this.finishingUsesGiven(allocationId, () => true))) return false;
    try {
      await this.release(caller, env.id, allocationId);
    } catch (e) {
      // A use came in first (it reads the old version), or a concurrent acquire is releasing it: look again.
      if (!isBerthError(e, 'environment_busy') && !isBerthError(e, 'invalid_state')) throw e;
    }
    return true;
  }

  /**
   * Waits while every use that `counts` is an execution past its run: each gives its use back in moments, once its
   * outcome is saved, so a caller told "finished" is not refused for it. True when none is left; false at once when
   * one is anything else (a running execution, a turn, a lease), or after FINISHING_USES_WAIT_MS.
   */
  private async finishingUsesGiven(allocationId: string, counts: (kind: UseKind) => boolean): Promise<boolean> {
    const deadline = Date.now() + FINISHING_USES_WAIT_MS;
    for (let delay = 2; ; delay = Math.min(delay * 2, 50)) {
      const held = (await this.deps.actors.get<AllocationContext>('allocation', allocationId))?.context.uses ?? {};
      const uses = Object.keys(held).filter((useId) => counts(held[useId]!.kind));
      if (uses.length === 0) return true;
      if (Date.now() >= deadline || !(await this.allFinished(uses))) return false;
      await sleep(delay);
    }
  }

  /** Whether every use is an execution past its run (exited, cancelled, failed, unknown), about to give it back. */
  private async allFinished(useIds: string[]): Promise<boolean> {
    for (const useId of useIds) {
      const x = await this.deps.actors.get<ExecutionContext>('execution', useId).catch(() => undefined);
      if (!x || x.state === 'pristine') return false;
      if (!terminalStatuses.has(executionStatus(x))) return false;
    }
    return true;
  }

  /**
   * The content version an execution on this allocation reads: the one bound when it was made (possibly none, if it
   * was made before any version was active) where its provider binds content at allocation, else `active` (mounted
   * per command).
   */
  async versionRead(allocationId: string, active: number | undefined): Promise<number | undefined> {
    if (active === undefined) return undefined; // no content: nothing to look up on the hot path
    const a = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
    return a && this.bindsContentAtAllocation(a.context.profile) ? a.context.contentVersion : active;
  }

  /** Recorded with the profile, so replay never asks a provider: the profile's own, else its provider's default. */
  reusePolicyOf(profile: Profile): ReusePolicy {
    return profile.reuse ?? this.deps.providers.get(profile.provider).defaultReuse;
  }

  private bindsContentAtAllocation(profile: Profile): boolean {
    return this.deps.providers.get(profile.provider).contentBinding === 'allocation';
  }

  /**
   * A new allocation requires confirmed absence of the previous one. A lost one is confirmed absent; a fenced one (a
   * container restarted behind Berth's back) still exists, so it is released first; while it still has uses, the
   * acquire fails with `environment_busy`. True when it released one (or a concurrent acquire did).
   */
  private async clearFenced(caller: Caller, id: string, allocationId: string): Promise<boolean> {
    const previous = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
    if (previous?.state !== 'fenced') return false;
    const uses = Object.keys(previous.context.uses).length;
    if (uses > 0) {
      const message = 'The previous allocation was restarted behind Berth\'s back and still has uses; it must be released first.';
      throw new BerthError('environment_busy', message, { environmentId: id, allocationId, uses });
    }
    try {
      await this.release(caller, id, allocationId);
    } catch (e) {
      if (!isBerthError(e, 'environment_busy') && !isBerthError(e, 'invalid_state')) throw e; // a concurrent acquire released it
    }
    return true;
  }

  /**
   * A durable claim on an allocation that blocks its release until given back. An `admission` use carries this
   * runtime's epoch and is dropped by its next recovery; other kinds survive restarts.
   */
  async acquireUse(
    caller: Caller,
    environmentId: string,
    allocationId: string,
    kind: UseKind,
    useId = `huse_${randomUUID()}`,
  ): Promise<AllocationView> {
    await this.allocationOf(caller, environmentId, allocationId);
    const { actors } = this.deps;
    const owner = kind === 'admission' ? { runtimeId: actors.runtimeId, epoch: actors.epoch } : {};
    await actors.send('allocation', allocationId, { type: 'allocation.use_acquired', useId, kind, ...owner, at: this.deps.now() });
    return this.allocationView(allocationId);
  }

  async releaseUse(caller: Caller, environmentId: string, allocationId: string, useId: string): Promise<AllocationView> {
    await this.allocationOf(caller, environmentId, allocationId);
    await this.deps.actors.send('allocation', allocationId, { type: 'allocation.use_released', useId, at: this.deps.now() });
    return this.allocationView(allocationId);
  }

  /** One page of the allocations alive of one of the caller's environments. */
  async listAllocations(caller: Caller, id: string, query?: PageQuery): Promise<Listing<AllocationView>> {
    const range = pageRange(query);
    await this.context(caller, id);
    const page = this.deps.allocations.query.page(id, range) as Page<ActiveAllocation>;
    return listingOf(page, await Promise.all(page.rows.map((a) => this.allocationView(a.allocationId))));
  }

  /**
   * One page of the active-allocation index, the caller's scope only. Allocations carry no scope: rows of other
   * scopes' environments are skipped and more are read until the page is full. The index holds only allocations
   * alive, so that walk is bounded by the work in flight, not the history.
   */
  async activeAllocations(caller: Caller, query?: PageQuery): Promise<Listing<AllocationView>> {
    const range = pageRange(query);
    await this.readModelsCaughtUp();
    const visible: ActiveAllocation[] = [];
    let page: Page<ActiveAllocation> = { rows: [], next: range.after };
    // Each read asks for what the page still lacks, so the last row read is the last row kept or skipped: its
    // cursor is where the next page starts.
    do {
      page = this.deps.allocations.query.page(undefined, { ...range, after: page.next, limit: range.limit - visible.length }) as Page<ActiveAllocation>;
      for (const a of page.rows) if (this.visibleTo(caller, a.environmentId)) visible.push(a);
    } while (page.next !== undefined && visible.length < range.limit);
    return listingOf(page, await Promise.all(visible.map((a) => this.allocationView(a.allocationId))));
  }

  private visibleTo(caller: Caller, environmentId: string): boolean {
    const entry = this.deps.catalog.query.get(environmentId) as CatalogEntry | undefined;
    return entry !== undefined && inScope(caller, entry.scope);
  }

  /**
   * Closes admission and deallocates; refused with `environment_busy` while a use is held or a provider call is in
   * flight. Uses of executions already finished are waited out first (they are given back once their outcome is
   * saved); mounts do not block (the release detaches them). Resolves once the provider confirmed termination (state
   * `released`), or with state `releasing` when it could not confirm it (the release intent is kept; recovery and
   * maintenance retry it).
   */
  async release(caller: Caller, id: string, allocationId: string): Promise<AllocationView> {
    const view = await this.allocationOf(caller, id, allocationId);
    if (view.state !== 'releasing') {
      await this.finishingUsesGiven(allocationId, (kind) => kind !== 'mount');
      await this.deps.actors.send('allocation', allocationId, { type: 'allocation.release_requested', reason: 'explicit', at: this.deps.now() });
    }
    await waitUntil(async () => {
      const a = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
      // Releasing with no call in flight: unconfirmed (kept for recovery), unless views are still being saved first.
      if (a?.state === 'releasing') return a.context.call === null && Object.keys(a.context.uses).length === 0;
      // Released: done once the environment has heard it too (it no longer names this allocation).
      const env = await this.deps.actors.get<EnvironmentContext>('environment', id);
      return env?.context.acquisition?.allocationId !== allocationId;
    }, Date.now() + RELEASE_TIMEOUT_MS);
    return this.allocationView(allocationId);
  }

  async allocationView(allocationId: string): Promise<AllocationView> {
    const a = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
    if (!a) throw new BerthError('not_found', 'No such allocation.', { allocationId });
    const c = a.context;
    return {
      allocationId,
      environmentId: c.environmentId,
      generation: c.generation,
      state: String(a.state),
      provider: c.profile.provider,
      ownership: c.ownership,
      ...(c.identity ? { identity: { resourceId: c.identity.resourceId, ...(c.identity.incarnation ? { incarnation: c.identity.incarnation } : {}) } } : {}),
      uses: Object.entries(c.uses).map(([useId, u]) => ({ useId, kind: u.kind })),
      createdAt: c.lastActivityAt,
      updatedAt: c.updatedAt,
    };
  }

  /** The profile stored for the caller's ask (role-policy.ts); provider_missing when its provider is not registered. */
  profileFor(caller: Caller, asked: Profile): Profile {
    const provider = this.deps.providers.get(asked.provider);
    provider.checkProfile?.(asked);
    return effectiveProfile(caller, asked, provider, this.deps.policy);
  }

  /**
   * Refuses to run a member's command on an environment whose stored profile the member could not have asked for
   * (made by an admin of the same scope, or stored before these rules): uncontained on the host, over a ceiling.
   */
  assertRunnable(caller: Caller, profile: Profile): void {
    assertWithinPolicy(caller, profile, this.deps.providers.get(profile.provider), this.deps.policy);
  }

  /** The environment's context, or environment_not_found when absent, deleted or of another scope. */
  async context(caller: Caller, id: string): Promise<EnvironmentContext> {
    return (await this.view(caller, id)).context;
  }

  private async view(caller: Caller, id: string): Promise<ActorView<EnvironmentContext>> {
    const view = ENVIRONMENT_ID.test(id) ? await this.deps.actors.get<EnvironmentContext>('environment', id) : undefined;
    if (!view || view.state === 'pristine' || view.state === 'deleted' || !inScope(caller, view.context.scope)) {
      throw new BerthError('environment_not_found', 'No such environment.', { environmentId: id });
    }
    return view;
  }

  private async allocationOf(caller: Caller, environmentId: string, allocationId: string): Promise<ActorView<AllocationContext>> {
    await this.view(caller, environmentId);
    const view = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
    if (!view || view.state === 'pristine' || view.context.environmentId !== environmentId) {
      throw new BerthError('not_found', 'The environment has no such allocation.', { environmentId, allocationId });
    }
    return view;
  }

  private async availability(profile: Profile): Promise<EnvironmentView['availability']> {
    try {
      return (await this.deps.providers.get(profile.provider).available(profile)) ? 'available' : 'unavailable';
    } catch {
      return 'unavailable';
    }
  }

  /** The provider backend serving `profile` (Provider.backendOf: a remote profile's host), asked once per render. */
  private backendKey(profile: Profile): string {
    try {
      return `${profile.provider}\0${this.deps.providers.get(profile.provider).backendOf?.(profile) ?? ''}`;
    } catch {
      return profile.provider; // not registered: its availability check says unavailable
    }
  }

  /**
   * Waits for the allocation under way (acquiring) or going away (releasing) to settle. A partial allocation is
   * resumed under its original intent; one the provider cannot tell about (or whose release it could not confirm)
   * is inspected once more by its request id, then the caller gets `unavailable`: the intent stays and maintenance
   * keeps reconciling it. Never allocates anew. Returns the failure when the acquisition ended with nothing allocated.
   */
  private async waitForAllocation(
    environmentId: string,
    envState: string,
    allocationId: string,
    deadline: number,
  ): Promise<BerthError | undefined> {
    const nudged = new Set<string>();
    await waitUntil(async () => {
      const env = await this.deps.actors.get<EnvironmentContext>('environment', environmentId);
      if (String(env?.state) !== envState || env?.context.acquisition?.allocationId !== allocationId) return true;
      const a = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
      if (!a || a.context.call !== null) return false;
      const state = String(a.state);
      const nudge = NUDGES[state];
      if (!nudge) return false;
      if (nudged.has(state)) {
        const report = a.context.lastReport;
        const why = report && 'reason' in report && report.reason ? report.reason : state;
        const message =
          state === 'releasing'
            ? `The provider has not confirmed the release of the previous allocation: ${why}.`
            : `The provider cannot tell whether the allocation exists: ${why}.`;
        throw new BerthError('unavailable', message, { environmentId, allocationId, state });
      }
      nudged.add(state);
      try {
        await this.deps.actors.send('allocation', allocationId, { type: nudge, at: this.deps.now() });
      } catch (e) {
        if (!isBerthError(e)) throw e; // another call got in first: wait for it
      }
      return false;
    }, deadline, ACQUIRE_POLL_MAX_MS);
    const env = await this.deps.actors.get<EnvironmentContext>('environment', environmentId);
    if (envState === 'acquiring' && env?.state === 'idle') {
      const a = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
      const report = a?.context.lastReport;
      if (report?.status === 'absent' && report.unreachable) {
        return new BerthError('provider_unavailable', report.reason ?? 'The provider does not answer; nothing was sent.', { environmentId, allocationId });
      }
      if (report?.status === 'absent' && report.reason) {
        return new BerthError('environment_invalid', `The provider refused the allocation: ${report.reason}`, { environmentId, allocationId });
      }
      return new BerthError('unavailable', 'The allocation failed: the provider confirmed nothing was created.', { environmentId, allocationId });
    }
    return undefined;
  }
}

/** Its version is not the active one, or is mounted at a path the environment no longer has (renamed). */
const isStale = (a: AllocationContext, env: EnvironmentContext): boolean =>
  (a.contentVersion ?? null) !== env.activeVersion ||
  (a.mounts ?? []).some((m) => m.target !== `/env/${env.slug}`);

/** What a waiting acquire sends an allocation that stopped short, once: resume a partial one, inspect an uncertain one. */
const NUDGES: Record<string, string> = {
  pending: 'allocation.resume_requested',
  unknown: 'allocation.reconcile_requested',
  releasing: 'allocation.reconcile_requested',
};
