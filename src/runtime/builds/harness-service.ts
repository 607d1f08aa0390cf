/**
 * Harnesses for callers (seed 001 §5): create/list/get/update/delete in a scope, and the harnesses naming one
 * environment. A write naming an environment that is not in the caller's scope (or does not exist) is refused with
 * environment_not_found; the reference is kept as written afterwards, so a task of a harness whose environment was
 * deleted is refused when it starts (`environmentOf`).
 */
import { randomBytes } from 'node:crypto';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { ActorRuntime, ActorView } from '../../actors/actor-runtime.ts';
import type { HarnessContext } from '../../machines/harness.machine.ts';
import type { HarnessEntry } from '../../projections/harnesses.projection.ts';
import type { Page } from '../../projections/projection.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import type { HarnessInput, HarnessView } from './content-api.ts';
import { inScope, listedScope } from '../caller.ts';
import { listingOf, pageRange, type Listing, type PageQuery } from '../listing.ts';
import type { EnvironmentService } from '../environments/environment-service.ts';
import type { Caller } from '../runtime-api.ts';

const HARNESS_ID = /^hhrn_[0-9a-f]{32}$/;

export interface HarnessServiceDeps {
  actors: ActorRuntime<any>;
  environments: EnvironmentService;
  harnesses: ReadModel;
  now: () => number;
}

export class HarnessService {
  constructor(private readonly deps: HarnessServiceDeps) {}

  async create(caller: Caller, input: HarnessInput & { name: string }): Promise<HarnessView> {
    if (input.environment) await this.deps.environments.context(caller, input.environment);
    const id = `hhrn_${randomBytes(16).toString('hex')}`;
    const sent = await this.deps.actors.send('harness', id, {
      type: 'harness.created',
      scope: caller.scope,
      name: input.name,
      ...(input.base ? { base: input.base } : {}),
      ...(input.environment ? { environmentId: input.environment } : {}),
      at: this.deps.now(),
    });
    await this.deps.harnesses.waitFor(sent.position, 10_000);
    return this.get(caller, id);
  }

  async list(caller: Caller, query?: PageQuery): Promise<Listing<HarnessView>> {
    const page = this.deps.harnesses.query.page(listedScope(caller), pageRange(query)) as Page<HarnessEntry>;
    return listingOf(page, await this.views(caller, page.rows));
  }

  async get(caller: Caller, id: string): Promise<HarnessView> {
    return viewOf(await this.view(caller, id));
  }

  async update(caller: Caller, id: string, patch: HarnessInput): Promise<HarnessView> {
    await this.view(caller, id);
    if (patch.environment) await this.deps.environments.context(caller, patch.environment);
    const event: Record<string, unknown> = { type: 'harness.updated', at: this.deps.now() };
    if (patch.name !== undefined) event.name = patch.name;
    if (patch.base !== undefined) event.base = patch.base;
    if (patch.environment !== undefined) event.environmentId = patch.environment;
    const sent = await this.deps.actors.send('harness', id, event as { type: string });
    await this.deps.harnesses.waitFor(sent.position, 10_000);
    return this.get(caller, id);
  }

  async delete(caller: Caller, id: string): Promise<void> {
    await this.view(caller, id);
    const sent = await this.deps.actors.send('harness', id, { type: 'harness.deleted', at: this.deps.now() });
    await this.deps.harnesses.waitFor(sent.position, 10_000);
  }

  /** One page of the harnesses naming one of the caller's environments (a page may hold fewer than its limit). */
  async naming(caller: Caller, environmentId: string, query?: PageQuery): Promise<Listing<HarnessView>> {
    const range = pageRange(query);
    await this.deps.environments.context(caller, environmentId);
    const page = this.deps.harnesses.query.naming(environmentId, range) as Page<HarnessEntry>;
    return listingOf(page, await this.views(caller, page.rows.filter((h) => inScope(caller, h.scope))));
  }

  /** The environment a task of this harness reads: environment_not_found when it is gone (or never was). */
  async environmentOf(caller: Caller, id: string): Promise<string> {
    const { context } = await this.view(caller, id);
    if (!context.environmentId) {
      throw new BerthError('invalid_request', 'The harness names no environment; name one in the task.', { harnessId: id });
    }
    await this.deps.environments.context(caller, context.environmentId);
    return context.environmentId;
  }

  private async views(caller: Caller, entries: HarnessEntry[]): Promise<HarnessView[]> {
    const views = await Promise.all(entries.map((h) => this.view(caller, h.id).then(viewOf, (e) => (isBerthError(e, 'not_found') ? undefined : Promise.reject(e)))));
    return views.filter((v): v is HarnessView => v !== undefined);
  }

  private async view(caller: Caller, id: string): Promise<ActorView<HarnessContext>> {
    const view = HARNESS_ID.test(id) ? await this.deps.actors.get<HarnessContext>('harness', id) : undefined;
    if (!view || view.state !== 'active' || !inScope(caller, view.context.scope)) {
      throw new BerthError('not_found', 'No such harness.', { harnessId: id });
    }
    return view;
  }
}

const viewOf = ({ context: c }: ActorView<HarnessContext>): HarnessView => ({
  id: c.id,
  object: 'harness',
  name: c.name,
  base: c.base,
  environment: c.environmentId,
  createdAt: c.createdAt,
  updatedAt: c.updatedAt,
});
