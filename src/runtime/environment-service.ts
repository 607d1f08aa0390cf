/**
 * Environments for callers: create/list/get/update/delete in a scope, and acquire/release of their allocation.
 * Acquisition coalesces: whoever finds the environment idle requests the next generation; every other caller (or a
 * request that lost the race) waits for the same allocation. Selecting an environment never allocates.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { BerthError, isBerthError } from '../../schemas/errors.ts';
import { profileSchema } from '../../schemas/profile.ts';
import type { ActorRuntime } from '../actors/actor-runtime.ts';
import type { AllocationContext } from '../machines/allocation.machine.ts';
import type { EnvironmentContext } from '../machines/environment.machine.ts';
import type { ReadModel } from '../projections/read-model.ts';
import type { CatalogEntry } from '../projections/catalog.projection.ts';
import type { ProviderRegistry } from './provider-registry.ts';
import type { AllocationView, Caller, CreateEnvironmentInput, EnvironmentView } from './runtime-api.ts';
import { waitUntil } from './wait-until.ts';

/** How long an acquire waits for an allocation under way before answering `unavailable`. */
const ACQUIRE_TIMEOUT_MS = 180_000;

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
  catalog: ReadModel;
  now: () => number;
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
    this.deps.providers.get(parsed.data.provider);
    const run = this.creating.then(async () => {
      if (this.deps.catalog.query.bySlug(caller.scope, slug)) {
        throw new BerthError('environment_exists', `An environment of this scope already has the slug "${slug}".`, { slug });
      }
      const id = newEnvironmentId();
      const sent = await this.deps.actors.send('environment', id, {
        type: 'environment.created',
        name: input.name.trim(),
        slug,
        scope: caller.scope,
        profile: parsed.data,
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

  list(caller: Caller): Promise<EnvironmentView[]> {
    const entries = this.deps.catalog.query.list(caller.role === 'admin' && caller.scope === '*' ? undefined : caller.scope) as CatalogEntry[];
    return Promise.all(entries.map((e) => this.get(caller, e.id)));
  }

  async get(caller: Caller, id: string): Promise<EnvironmentView> {
    const ctx = await this.context(caller, id);
    const allocation = ctx.acquisition
      ? await this.deps.actors.get<AllocationContext>('allocation', ctx.acquisition.allocationId)
      : undefined;
    let availability: EnvironmentView['availability'] = 'available';
    try {
      if (!(await this.deps.providers.get(ctx.profile.provider).available())) availability = 'unavailable';
    } catch {
      availability = 'unavailable';
    }
    return {
      id,
      object: 'environment',
      name: ctx.name,
      slug: ctx.slug,
      description: ctx.description ?? '',
      entry: ctx.entry ?? '',
      status: 'empty',
      mount: `/env/${ctx.slug}`,
      version: null,
      latestVersion: null,
      profile: ctx.profile,
      availability,
      allocation:
        ctx.acquisition && allocation
          ? { allocationId: ctx.acquisition.allocationId, generation: ctx.acquisition.generation, state: String(allocation.state) }
          : null,
      createdAt: ctx.createdAt,
      updatedAt: ctx.updatedAt,
    };
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
      this.deps.providers.get(parsed.data.provider);
      event.profile = parsed.data;
    }
    const sent = await this.deps.actors.send('environment', id, event as { type: string });
    await this.deps.catalog.waitFor(sent.position, 10_000);
    return this.get(caller, id);
  }

  async delete(caller: Caller, id: string): Promise<void> {
    await this.context(caller, id);
    const sent = await this.deps.actors.send('environment', id, { type: 'environment.deleted', at: this.deps.now() });
    await this.deps.catalog.waitFor(sent.position, 10_000);
  }

  /** The environment's ready allocation, allocating it first if there is none (coalesced with concurrent callers). */
  async acquire(caller: Caller, id: string): Promise<AllocationView> {
    const deadline = Date.now() + ACQUIRE_TIMEOUT_MS;
    for (;;) {
      const env = await this.context(caller, id);
      const a = env.acquisition;
      const state = await this.stateOf(id);
      if (a && state === 'allocated') return this.allocationView(a.allocationId);
      if (state === 'idle' || state === 'lost') {
        this.deps.providers.get(env.profile.provider);
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
      if (state === 'acquiring' && a) await this.waitForAllocation(id, a.allocationId, deadline);
      else await waitUntil(async () => (await this.stateOf(id)) !== state, deadline);
    }
  }

  async listAllocations(caller: Caller, id: string, active: ReadModel): Promise<AllocationView[]> {
    await this.context(caller, id);
    const ids = (active.query.ofEnvironment(id) as { allocationId: string }[]).map((a) => a.allocationId);
    return Promise.all(ids.map((allocationId) => this.allocationView(allocationId)));
  }

  async release(caller: Caller, id: string, allocationId: string): Promise<AllocationView> {
    await this.context(caller, id);
    const view = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
    if (!view || view.context.environmentId !== id) {
      throw new BerthError('not_found', 'The environment has no such allocation.', { environmentId: id, allocationId });
    }
    if (view.state !== 'releasing') {
      await this.deps.actors.send('allocation', allocationId, { type: 'allocation.release_requested', reason: 'explicit', at: this.deps.now() });
    }
    await waitUntil(async () => {
      const a = await this.deps.actors.get('allocation', allocationId);
      return !a || a.state === 'released' || (a.state === 'releasing' && a.context.call === null);
    }, Date.now() + 120_000);
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

  /** The environment's context, or environment_not_found when absent, deleted or of another scope. */
  async context(caller: Caller, id: string): Promise<EnvironmentContext & { generation: number }> {
    const view = /^henv_[0-9a-f]{32}$/.test(id) ? await this.deps.actors.get<EnvironmentContext>('environment', id) : undefined;
    if (!view || view.state === 'pristine' || view.state === 'deleted' || !inScope(caller, view.context.scope)) {
      throw new BerthError('environment_not_found', 'No such environment.', { environmentId: id });
    }
    return view.context;
  }

  private async stateOf(id: string): Promise<string> {
    return String((await this.deps.actors.get('environment', id))?.state);
  }

  /** Waits until the allocation under way is ready, or fails the acquire when it cannot become ready now. */
  private async waitForAllocation(environmentId: string, allocationId: string, deadline: number): Promise<void> {
    await waitUntil(async () => {
      const envState = await this.stateOf(environmentId);
      if (envState !== 'acquiring') return true;
      const a = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
      if (a?.state === 'unknown') {
        const report = a.context.lastReport;
        throw new BerthError('unavailable', `The provider cannot tell whether the allocation exists: ${report && 'reason' in report ? report.reason : 'unknown'}.`, {
          environmentId,
          allocationId,
        });
      }
      return false;
    }, deadline);
    const env = await this.deps.actors.get<EnvironmentContext>('environment', environmentId);
    if (env?.state === 'idle') {
      const a = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
      const report = a?.context.lastReport;
      throw new BerthError('unavailable', `The allocation failed: ${report && 'reason' in report && report.reason ? report.reason : 'the provider confirmed nothing was created'}.`, {
        environmentId,
        allocationId,
      });
    }
  }
}

export const inScope = (caller: Caller, scope: string): boolean => caller.scope === scope || (caller.role === 'admin' && caller.scope === '*');
