/**
 * The environment's effect that claims a warm pool's allocation (AllocationIntendParams.pooled): the claim is the one
 * durable step that moves the allocation to the environment, recording the content version it will show; only then
 * is the version shown (Provider.pooling.applyContent), and only then is the environment told `allocated`. So a
 * container is filled only for the environment the record says holds it, and a command never runs before its version
 * is there. Recovery of an environment whose claim was under way sends the claim again: refused as already made, it
 * shows the version the claim recorded (not whatever is active now) and answers the missed notification.
 */
import { isBerthError, BerthError } from '../../../schemas/errors.ts';
import type { DomainEvent, EffectContext } from '../../actors/actor-type.ts';
import type { AllocationIntendParams } from '../../machines/environment.machine.ts';
import { allocationRef, missedNotice } from '../environments/allocation.actor.ts';
import { allocationContent, versionMount } from '../executions/version-exec.ts';
import type { Services } from '../services.ts';

export async function claimPooled(p: AllocationIntendParams, ctx: EffectContext<Services>): Promise<DomainEvent | undefined> {
  const { services } = ctx;
  const at = services.now();
  const { allocationId, environmentId, generation, profile } = p;
  let { contentVersion } = await allocationContent(services, environmentId, profile);
  try {
    await ctx.send('allocation', allocationId, { type: 'allocation.claimed', environmentId, generation, profile, ...(contentVersion ? { contentVersion } : {}), at });
  } catch (e) {
    if (!isBerthError(e)) throw e;
    const missed = missedNotice(e);
    if (missed && missed.type === p.reflected) return undefined; // recovery: the environment knows, the version is shown
    if (!missed) return { type: 'environment.allocation_failed', allocationId, reason: `pool claim refused: ${e.message}`, at };
    if (missed.type !== 'environment.allocated') return missed;
    contentVersion = typeof e.detail.contentVersion === 'number' ? e.detail.contentVersion : undefined;
  }
  if (contentVersion !== undefined) {
    try {
      const pooling = services.providers.get(profile.provider).pooling;
      if (!pooling) throw new BerthError('internal', `Provider ${profile.provider} keeps no warm pools.`, { allocationId });
      await pooling.applyContent(allocationRef(p), await versionMount(services, environmentId, contentVersion));
    } catch {
      // Never a container without its version, nor with another: it is let go. Its release takes the environment
      // back to idle, and the acquire waiting on this claim takes another container or goes cold. A release refused
      // now leaves the environment acquiring: its recovery applies the version again.
      await ctx.send('allocation', allocationId, { type: 'allocation.release_requested', reason: 'explicit', at }).catch((refused) => {
        if (!isBerthError(refused)) throw refused;
      });
      return undefined;
    }
  }
  return { type: 'environment.allocated', allocationId, generation, at };
}
