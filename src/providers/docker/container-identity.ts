/**
 * What a container's inspection says of it as an allocation: its physical identity (the incarnation Berth records
 * and fences by) and whether it serves commands. Shared by the provider's inspection and the warm pool's claim.
 */
import type Docker from 'dockerode';
import type { PhysicalIdentity } from '../provider.ts';
import { SPOOL_PATH } from './container-spec.ts';

export function identityOf(info: Docker.ContainerInspectInfo): PhysicalIdentity {
  // NetworkMode 'none' is the engine's built-in network, not one of the allocation's.
  const networkMode = info.HostConfig.NetworkMode;
  const networkId = networkMode && networkMode !== 'none' ? info.NetworkSettings.Networks?.[networkMode]?.NetworkID : undefined;
  const volume = info.Mounts.find((m) => m.Destination === SPOOL_PATH)?.Name;
  return {
    provider: 'docker',
    resourceId: info.Id,
    incarnation: `${info.Id}@${info.State.StartedAt}`,
    ...(networkId ? { networkId } : {}),
    ...(volume ? { volume } : {}),
  };
}

/** Running, neither paused nor restarting. */
export const isServing = (info: Docker.ContainerInspectInfo): boolean =>
  info.State.Running && !info.State.Paused && !info.State.Restarting;
