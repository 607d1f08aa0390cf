/**
 * What the two sides of the Execution Host protocol say of the kinds: a host runs a `remote` profile as its native
 * provider's own, and reports its allocations as `remote` resources fenced by its incarnation. Here, under
 * src/providers, so the host's layer (src/host) never spells a kind.
 */
import type { Profile } from '../../../schemas/profile.ts';
import type { PhysicalIdentity } from '../provider.ts';

/** The profile a host runs a remote allocation's commands with (its kind and host name dropped). */
export function hostedProfile(profile: Profile): Profile {
  const { host: _host, ...rest } = profile;
  return { ...rest, provider: 'native' };
}

/** A host's allocations as the control plane records them; the provider renames `resourceId` to its host's name. */
export function hostedIdentity(resourceId: string, incarnation: string): PhysicalIdentity {
  return { provider: 'remote', resourceId, incarnation };
}
