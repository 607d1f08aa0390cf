/**
 * What the two sides of the Execution Host protocol say of the kinds: a host runs a `remote` profile with the
 * provider its `backend` names (its native one by default, or its local Docker engine), and reports its allocations
 * as `remote` resources fenced by its incarnation. Here, under src/providers, so the host's layer (src/host) never
 * spells a kind.
 */
import type { Profile } from '../../../schemas/profile.ts';
import type { PhysicalIdentity } from '../provider.ts';

/** The providers a host may serve, by the `backend` a remote profile names. */
export type HostBackend = NonNullable<Profile['backend']>;

/** The backend of a remote profile (native when it names none). */
export const backendOf = (profile: Profile): HostBackend => profile.backend ?? 'native';

/** The profile a host runs a remote allocation's commands with (its kind, host name and backend dropped). */
export function hostedProfile(profile: Profile): Profile {
  const { host: _host, backend: _backend, ...rest } = profile;
  return { ...rest, provider: backendOf(profile) };
}

/** A host's allocations as the control plane records them; the provider renames `resourceId` to its host's name. */
export function hostedIdentity(resourceId: string, incarnation: string): PhysicalIdentity {
  return { provider: 'remote', resourceId, incarnation };
}
