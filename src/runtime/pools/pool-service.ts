/**
 * Warm pools: for each admin-configured pool, keeps `size` allocations made and started ahead of need. Each is an
 * allocation actor like any other whose owner is the pool (`environmentId` = `hpool_<name>`), so recovery,
 * reconciliation and the active-allocation index cover it; it is handed out only once a probe command ran through
 * its supervisor. A claim takes a ready one, checks and personalizes it (Provider.pooling) and lets the environment
 * rebind it (`allocation.claimed`: one durable step); refills run in the background, backing off after failures.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import type { ActorRuntime } from '../../actors/actor-runtime.ts';
import type { AllocationContext } from '../../machines/allocation.machine.ts';
import type { ActiveAllocation } from '../../projections/active-allocations.projection.ts';
import type { Executor, PoolingCapability } from '../../providers/provider.ts';
import { allocationRef } from '../environments/allocation.actor.ts';
import type { ProviderRegistry } from '../provider-registry.ts';
import type { PoolSettings } from './pool-config.ts';
import type { ClaimResult, PoolObserver, PoolStatus } from './pool-stats.ts';
import { RefillBackoff } from './refill-backoff.ts';

/** How often the refill loop looks at every pool when nothing wakes it. */
const TICK_MS = 500;
/** How long the probe command may take to run through a new container's supervisor. */
const PROBE_TIMEOUT_MS = 15_000;

export interface PoolServiceDeps {
  actors: ActorRuntime<any>;
  providers: ProviderRegistry;
  /** The allocations alive (the active-allocation index): where a restart finds its pools' members again. */
  active: () => ActiveAllocation[];
  executorFor(allocationId: string): Promise<Executor>;
  now: () => number;
  logger?: Logger;
  /** Told of claims and failed refills (/metrics: pool-metrics.ts). */
  observer?: PoolObserver;
}

/** A ready pooled allocation offered to a claim. */
export interface PooledAllocation {
  allocationId: string;
  requestId: string;
}

/**
 * What a claim's rebinding step answers: `claimed` (the environment holds it now), `unused` (the environment took
 * another path first: the allocation goes back to the pool), `refused` (the allocation would not be claimed).
 */
export type RebindOutcome = 'claimed' | 'unused' | 'refused';

type MemberState = 'starting' | 'probing' | 'ready' | 'claiming' | 'retiring';

interface Member {
  state: MemberState;
  bornAt: number;
}

class Pool {
  readonly id: string;
  readonly members = new Map<string, Member>();
  readonly claims: Record<ClaimResult, number> = { hit: 0, miss: 0, fallback: 0 };
  readonly backoff = new RefillBackoff();

  constructor(readonly settings: PoolSettings) {
    this.id = `hpool_${settings.name}`;
  }

  /** Ready members, oldest first (the oldest is claimed first: it is nearest its maximum age). */
  ready(): string[] {
    return [...this.members].filter(([, m]) => m.state === 'ready').sort(([, a], [, b]) => a.bornAt - b.bornAt).map(([id]) => id);
  }

  status(): PoolStatus {
    const count = (s: MemberState) => [...this.members.values()].filter((m) => m.state === s).length;
    return {
      name: this.settings.name,
      profile: this.settings.profile,
      size: this.settings.size,
      ...(this.settings.maxAgeSeconds ? { maxAgeSeconds: this.settings.maxAgeSeconds } : {}),
      ready: count('ready'),
      starting: count('starting') + count('probing'),
      retiring: count('retiring'),
      ...this.backoff.status(),
      claims: { ...this.claims },
    };
  }
}

export class PoolService {
  private readonly pools: Pool[];
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;
  private again = false;
  private stopped = false;

  constructor(
    private readonly deps: PoolServiceDeps,
    settings: PoolSettings[],
  ) {
    for (const s of settings) this.pooling(s.profile); // a provider that cannot pool refuses the start
    this.pools = settings.map((s) => new Pool(s));
  }

  /** Finds the pools' members again (after a restart) and starts the refill loop. */
  start(): void {
    for (const a of this.deps.active()) {
      const pool = this.pools.find((p) => p.id === a.environmentId);
      if (pool) pool.members.set(a.allocationId, { state: 'starting', bornAt: a.createdAt });
    }
    this.timer = setInterval(() => this.wake(), TICK_MS);
    this.timer.unref();
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.ticking;
  }

  status(): PoolStatus[] {
    return this.pools.map((p) => p.status());
  }

  /** The pool whose name it is, or undefined. */
  has(name: string): boolean {
    return this.pools.some((p) => p.settings.name === name);
  }

  /**
   * Hands a ready pooled allocation to `rebind` (the environment's claim) if a pool fits `profile`: each candidate
   * is marked claiming at once (a concurrent claim gets another), checked and personalized; one found gone is
   * reconciled and the next one tried. Undefined when no pool fits, none is ready (a miss), or the one taken cannot
   * show a content version `withContent` asks for (a fallback: it stays pooled): the acquire goes cold.
   */
  async claim(profile: Profile, rebind: (c: PooledAllocation) => Promise<RebindOutcome>, withContent = false): Promise<string | undefined> {
    const pool = this.pools.find((p) => this.pooling(p.settings.profile).fits(p.settings.profile, profile));
    if (!pool) return undefined;
    const started = performance.now();
    for (;;) {
      const [allocationId] = pool.ready();
      if (!allocationId) {
        this.counted(pool, 'miss');
        this.wake();
        return undefined;
      }
      const member = pool.members.get(allocationId)!;
      member.state = 'claiming';
      const view = await this.deps.actors.get<AllocationContext>('allocation', allocationId);
      if (view?.state !== 'ready' || view.context.environmentId !== pool.id) {
        member.state = 'starting'; // the refill loop looks at what it became
        continue;
      }
      let look: 'ready' | 'gone' | 'cold';
      try {
        const { identity, ...recorded } = view.context;
        look = await this.pooling(profile).personalize(allocationRef({ allocationId, ...recorded, ...(identity ? { identity } : {}) }), profile, withContent);
      } catch (e) {
        // The engine cannot tell: this claim goes cold; the allocation stays in the pool.
        this.deps.logger?.warn({ pool: pool.settings.name, allocationId, err: e }, 'pooled allocation could not be checked');
        member.state = 'ready';
        this.counted(pool, 'miss');
        return undefined;
      }
      if (look === 'cold') {
        member.state = 'ready';
        this.counted(pool, 'fallback');
        return undefined;
      }
      if (look === 'gone') {
        member.state = 'starting';
        await this.tolerate(this.deps.actors.send('allocation', allocationId, { type: 'allocation.reconcile_requested', at: this.deps.now() }));
        continue;
      }
      let outcome: RebindOutcome;
      try {
        outcome = await rebind({ allocationId, requestId: view.context.requestId });
      } catch (e) {
        member.state = 'starting'; // the refill loop looks at what it became
        throw e;
      }
      if (outcome === 'unused') {
        member.state = 'ready';
        return undefined;
      }
      pool.members.delete(allocationId);
      this.wake();
      if (outcome === 'claimed') {
        this.counted(pool, 'hit', (performance.now() - started) / 1000);
        return allocationId;
      }
    }
  }

  /** Releases every ready allocation of the pool `name` (they are made again, e.g. from a new image). How many. */
  async drain(name: string): Promise<number> {
    const pool = this.pools.find((p) => p.settings.name === name);
    if (!pool) return 0;
    const drained = pool.ready();
    for (const id of drained) await this.retire(pool, id);
    this.wake();
    return drained.length;
  }

  /** Runs one pass of the refill loop now (or right after the one under way). */
  wake(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    this.ticking = (async () => {
      do {
        this.again = false;
        for (const pool of this.pools) {
          try {
            await this.tend(pool);
          } catch (e) {
            this.deps.logger?.error({ pool: pool.settings.name, err: e }, 'warm pool refill pass failed');
          }
        }
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.ticking = undefined;
    });
  }

  /** One pass over a pool: follow its members, retire the aged, start what it lacks. */
  private async tend(pool: Pool): Promise<void> {
    const now = this.deps.now();
    for (const [id, member] of [...pool.members]) {
      if (member.state === 'starting' || member.state === 'retiring') await this.follow(pool, id, member);
    }
    const maxAgeMs = (pool.settings.maxAgeSeconds ?? 0) * 1000;
    if (maxAgeMs > 0) {
      for (const id of pool.ready().filter((id) => now - pool.members.get(id)!.bornAt >= maxAgeMs)) await this.retire(pool, id);
    }
    const lacking = pool.settings.size - pool.members.size;
    const starts = pool.backoff.allowed(lacking, now);
    for (let i = 0; i < starts; i++) await this.startOne(pool, now);
  }

  private async startOne(pool: Pool, now: number): Promise<void> {
    const allocationId = `halloc_${randomUUID()}`;
    const { profile } = pool.settings;
    pool.backoff.attempted(now);
    pool.members.set(allocationId, { state: 'starting', bornAt: now });
    await this.deps.actors.send('allocation', allocationId, {
      type: 'allocation.intended',
      environmentId: pool.id,
      requestId: `hreq_${randomUUID()}`,
      generation: 1,
      profile,
      ownership: this.deps.providers.get(profile.provider).ownership,
      at: now,
    });
  }

  /** What a starting or retiring member's allocation became. */
  private async follow(pool: Pool, id: string, member: Member): Promise<void> {
    const view = await this.deps.actors.get<AllocationContext>('allocation', id);
    const state = String(view?.state);
    if (!view || view.context.environmentId !== pool.id || state === 'released') {
      pool.members.delete(id); // claimed by an environment, or gone for good
      return;
    }
    if (state === 'failed') {
      pool.members.delete(id);
      const report = view.context.lastReport;
      const reason = report && 'reason' in report && report.reason ? report.reason : 'the provider made nothing';
      this.refillFailed(pool, reason);
      this.deps.logger?.warn({ pool: pool.settings.name, allocationId: id, reason }, 'warm pool refill failed; backing off');
      return;
    }
    if (member.state === 'retiring') return;
    if (state === 'lost' || state === 'fenced') return this.retire(pool, id);
    if (state === 'ready' && view.context.call === null) {
      member.state = 'probing';
      void this.probe(pool, id, member);
    }
    // requested, pending, unknown: the allocation's own recovery and maintenance settle it.
  }

  /** Ready only once a command ran through its supervisor; that command's spool is dropped after. */
  private async probe(pool: Pool, id: string, member: Member): Promise<void> {
    const operationId = `pool-probe-${id}`;
    let ok = false;
    try {
      const executor = await this.deps.executorFor(id);
      let receipt = await executor.submit({ operationId, command: ['/bin/sh', '-c', 'true'], env: {}, stdin: false, settleMs: 2_000 });
      const deadline = Date.now() + PROBE_TIMEOUT_MS;
      while (receipt.state !== 'exited' && Date.now() < deadline) {
        // The receipt (no cursors): a wait for any change from now on could begin after the exit, and sleep 200 ms.
        await executor.waitForChange(operationId, 200, {});
        receipt = await executor.status(operationId);
      }
      ok = receipt.state === 'exited' && receipt.exitCode === 0;
      await executor.release(operationId);
    } catch (e) {
      this.deps.logger?.warn({ pool: pool.settings.name, allocationId: id, err: e }, 'pooled allocation probe failed');
    }
    if (pool.members.get(id) !== member || member.state !== 'probing') return;
    if (!ok) {
      this.refillFailed(pool, 'the probe command did not run through the supervisor');
      return this.retire(pool, id);
    }
    pool.backoff.succeeded();
    member.state = 'ready';
  }

  private async retire(pool: Pool, id: string): Promise<void> {
    const member = pool.members.get(id);
    if (member) member.state = 'retiring';
    await this.tolerate(this.deps.actors.send('allocation', id, { type: 'allocation.release_requested', reason: 'explicit', at: this.deps.now() }));
  }

  private counted(pool: Pool, result: ClaimResult, seconds?: number): void {
    pool.claims[result]++;
    this.deps.observer?.claimed(pool.settings.name, result, seconds);
  }

  private refillFailed(pool: Pool, reason: string): void {
    pool.backoff.failed(reason, this.deps.now());
    this.deps.observer?.refillFailed(pool.settings.name);
  }

  private pooling(profile: Profile): PoolingCapability {
    const provider = this.deps.providers.get(profile.provider);
    if (!provider.pooling) throw new BerthError('invalid_request', `invalid configuration: provider ${profile.provider} keeps no warm pools`, { provider: profile.provider });
    return provider.pooling;
  }

  private async tolerate(send: Promise<unknown>): Promise<void> {
    try {
      await send;
    } catch (e) {
      if (!isBerthError(e)) throw e;
    }
  }
}
