/**
 * The allocation actor type: provider calls as effects. Each call's outcome comes back as an event; a call that
 * throws or times out reports `unknown` (never treated as absence), so recovery inspects by the original request id.
 * The one exception is a provider's definite refusal of the profile (`environment_invalid`: the image is missing,
 * the engine rejects the limits): it created nothing, so that is confirmed absence with its reason. So is a
 * provider that was not reached at all (`provider_unavailable`) on the intent's first call: nothing of the request
 * can exist before it. On a later call (a resume after parts were made) that stays `unknown`.
 */
import { allocationEvents, type AllocationReportData } from '../../../schemas/events/allocation.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import { crashAt } from '../../providers/crash-point.ts';
import {
  allocationMachine,
  finished,
  reject,
  type EnvironmentNotifyParams,
  type MountsParams,
  type ProviderCallParams,
} from '../../machines/allocation.machine.ts';
import { defineActor, type DomainEvent } from '../../actors/actor-type.ts';
import type { AllocationRef } from '../../providers/provider.ts';
import type { Services } from '../services.ts';

/** A provider call that has not answered by then is reported unknown; inspection takes over. */
const PROVIDER_CALL_TIMEOUT_MS = 120_000;

const withTimeout = <T>(p: Promise<T>, ms: number): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    p.then(resolve, reject).finally(() => clearTimeout(timer));
  });

/**
 * What an allocation's refusal of a re-sent intent or claim (`invalid_state`) says its environment may have missed
 * (allocation.machine.ts `reject`), if anything.
 */
export const missedNotice = (e: unknown): DomainEvent | undefined =>
  isBerthError(e, 'invalid_state') ? (e.detail.environmentEvent as DomainEvent | undefined) : undefined;

/** How a provider is told which allocation a call is about (also the warm pool's claim: pools/). */
export const allocationRef = (p: ProviderCallParams): AllocationRef => ({
  requestId: p.requestId,
  allocationId: p.allocationId,
  environmentId: p.environmentId,
  generation: p.generation,
  profile: p.profile,
  ...(p.identity ? { identity: p.identity } : {}),
});

const reportOf = async (call: () => Promise<AllocationReportData>, firstCall = false): Promise<AllocationReportData> => {
  try {
    return await withTimeout(call(), PROVIDER_CALL_TIMEOUT_MS);
  } catch (e) {
    if (isBerthError(e, 'environment_invalid')) return { status: 'absent', reason: e.message };
    if (firstCall && isBerthError(e, 'provider_unavailable')) return { status: 'absent', reason: e.message, unreachable: true };
    return { status: 'unknown', reason: e instanceof Error ? e.message : String(e) };
  }
};

export const allocationActor = defineActor<typeof allocationMachine, Services>({
  type: 'allocation',
  machine: allocationMachine,
  input: (id) => ({ id }),
  events: allocationEvents,
  finished,
  reject,
  effects: {
    'provider.allocate': async (p: ProviderCallParams, ctx) => {
      // Caused by the intent itself: the first call (recovery and resumes never send it from there).
      const firstCall = ctx.cause.type === 'allocation.intended';
      const report = await reportOf(() => ctx.services.providers.get(p.profile.provider).allocate(p) as Promise<AllocationReportData>, firstCall);
      crashAt('allocation.provider-answered'); // recovery tests: the resource exists, its report is not yet durable
      return { type: 'allocation.reported', report, at: ctx.services.now() };
    },
    'provider.inspect': async (p: ProviderCallParams, ctx) => {
      const report = await reportOf(() => ctx.services.providers.get(p.profile.provider).inspect(allocationRef(p)) as Promise<AllocationReportData>);
      return { type: 'allocation.reported', report, at: ctx.services.now() };
    },
    'provider.deallocate': async (p: ProviderCallParams, ctx) => {
      let result: 'terminated' | 'unknown';
      try {
        result = await withTimeout(ctx.services.providers.get(p.profile.provider).deallocate(allocationRef(p)), PROVIDER_CALL_TIMEOUT_MS);
      } catch {
        result = 'unknown';
      }
      return { type: 'allocation.deallocated', result, at: ctx.services.now() };
    },
    /** Release saves first: each view is asked to save and detach (it gives its use back once detached). */
    'mounts.detach': async (p: MountsParams, ctx) => {
      for (const workspaceId of p.workspaceIds) await ctx.services.mounts.detachForRelease(workspaceId);
    },
    /** A view whose allocation is confirmed gone (or not the incarnation recorded) becomes unavailable. */
    'mounts.lost': async (p: MountsParams, ctx) => {
      for (const workspaceId of p.workspaceIds) {
        await ctx.send('mount', workspaceId, { type: 'mount.lost', allocationId: p.allocationId, reason: 'the allocation is gone', at: ctx.services.now() }).catch((e) => {
          if (!isBerthError(e)) throw e;
        });
      }
    },
    /** The environment may already know (invalid_state) or have moved on (stale_target): both are fine. */
    'environment.notify': async (p: EnvironmentNotifyParams, ctx) => {
      if (!p.event) return; // a pool's allocation: no environment to tell
      try {
        await ctx.send('environment', p.environmentId, p.event);
      } catch (e) {
        if (!isBerthError(e, 'invalid_state') && !isBerthError(e, 'stale_target')) throw e;
      }
    },
  },
});
