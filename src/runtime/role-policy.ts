/**
 * What a role may ask for (DESIGN §13), as pure decisions: a member's profile is contained, without a network, on a
 * borrowed host and held under the admin's ceilings, and a member's scope under its quotas. Admin callers are trusted and exempt.
 * Refusals are typed: `forbidden` for what the role may never do, `quota_exceeded` for a ceiling or quota.
 */
import { BerthError } from '../../schemas/errors.ts';
import { DEFAULT_HOME_MB, DEFAULT_WORKSPACE_MB, type Profile } from '../../schemas/profile.ts';
import type { Caller } from './caller.ts';

/** The most a member's profile may ask for; unset limits take these values. */
export interface ProfileCeilings {
  memoryMb: number;
  cpus: number;
  pidsLimit: number;
  /** MiB of a container command's HOME (profile.homeMb). */
  homeMb: number;
  /** MiB of a container's workspace view (profile.workspaceMb). */
  workspaceMb: number;
  /** `bridge`: members may have a network; `none`: never. */
  network: 'none' | 'bridge';
}

/** What a member's scope may hold at once. */
export interface ScopeQuotas {
  environments: number;
  /** Executions not yet terminal (accepted or running). */
  concurrentExecutions: number;
  /** Builds running (each runs the member's installers with the profile's memory and CPUs, as a command does). */
  concurrentBuilds: number;
  /** Archive and git imports running (a git import is a git process on the server's host). */
  concurrentImports: number;
  /** Bytes one execution may write (all its streams together) before it is stopped. */
  outputBytes: number;
  /** Output bytes the scope's executions keep on disk (spools and saved output), checked at admission. */
  scopeOutputBytes: number;
  /** Managed workspaces (directories Berth makes in the data directory). */
  workspaces: number;
  /** Leases bound and not released (each is a stream, an actor and, once acquired, an environment). */
  leases: number;
}

export interface RolePolicy {
  ceilings: ProfileCeilings;
  quotas: ScopeQuotas;
  /**
   * MiB the data directory's filesystem keeps for the event store: below it members' writes are refused and their
   * commands stopped (maintenance/disk-reserve.ts). Unset: 1 GiB, at most a tenth of the filesystem; 0: none.
   */
  diskReserveMb?: number;
}

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

export const defaultRolePolicy: RolePolicy = {
  ceilings: { memoryMb: 2048, cpus: 2, pidsLimit: 512, homeMb: 2048, workspaceMb: 2048, network: 'bridge' },
  quotas: { environments: 100, concurrentExecutions: 8, concurrentBuilds: 4, concurrentImports: 4, outputBytes: 1 * GiB, scopeOutputBytes: 10 * GiB, workspaces: 100, leases: 1000 },
};

/** How the provider a profile names treats its commands: on a borrowed host they run as the server unless contained. */
export interface ProviderTraits {
  ownership: 'borrowed' | 'managed';
}

export const isMember = (caller: Caller): boolean => caller.role !== 'admin';

const LIMITS = ['memoryMb', 'cpus', 'pidsLimit'] as const;
/** Tmpfs sizes, held under a ceiling when asked for; unset, each keeps its default size (at most the ceiling). */
const SIZES = { homeMb: DEFAULT_HOME_MB, workspaceMb: DEFAULT_WORKSPACE_MB } as const;
const CAPPED = [...LIMITS, ...(Object.keys(SIZES) as Array<keyof typeof SIZES>)] as const;

/**
 * The profile stored for `caller`: an admin's as asked; a member's contained on a borrowed host (asking for
 * `contain: false` is forbidden), every limit at most its ceiling and unset limits at the ceiling.
 */
export function effectiveProfile(caller: Caller, profile: Profile, provider: ProviderTraits, policy: RolePolicy): Profile {
  if (!isMember(caller)) return profile;
  assertWithinPolicy(caller, profile, provider, policy, { containUnset: 'allowed' });
  const { ceilings } = policy;
  const stored: Profile = { ...profile };
  for (const limit of LIMITS) stored[limit] ??= ceilings[limit];
  for (const [size, fallback] of Object.entries(SIZES) as Array<[keyof typeof SIZES, number]>) {
    if (ceilings[size] < fallback) stored[size] ??= ceilings[size];
  }
  // On a borrowed host a network is the host's own stack (its loopback services, its addresses): never a member's.
  stored.network ??= provider.ownership === 'borrowed' ? 'none' : ceilings.network;
  if (provider.ownership === 'borrowed') stored.contain = true;
  return stored;
}

/**
 * Refuses a member's use of a profile it may not have: uncontained on a borrowed host (`contain: false`, or unset
 * where `containUnset` is 'refused': an environment stored before these rules) or with the host's network, or a
 * limit over its ceiling.
 */
export function assertWithinPolicy(
  caller: Caller,
  profile: Profile,
  provider: ProviderTraits,
  policy: RolePolicy,
  options: { containUnset: 'allowed' | 'refused' } = { containUnset: 'refused' },
): void {
  if (!isMember(caller)) return;
  const uncontained = profile.contain === false || (profile.contain === undefined && options.containUnset === 'refused');
  if (provider.ownership === 'borrowed' && uncontained) {
    throw new BerthError('forbidden', 'A member\'s commands on the host are always contained; only an admin may run them uncontained.', {
      role: caller.role,
      field: 'profile.contain',
    });
  }
  if (provider.ownership === 'borrowed' && profile.network === 'bridge') {
    throw new BerthError('forbidden', 'A member\'s commands on the host have no network: the host\'s would show its loopback services.', {
      role: caller.role,
      field: 'profile.network',
    });
  }
  const { ceilings } = policy;
  for (const limit of CAPPED) {
    const requested = profile[limit];
    if (requested !== undefined && requested > ceilings[limit]) {
      throw new BerthError('quota_exceeded', `The profile asks for ${limit} ${requested}, over the ceiling of ${ceilings[limit]}.`, {
        quota: limit,
        limit: ceilings[limit],
        requested,
      });
    }
  }
  if (profile.network === 'bridge' && ceilings.network === 'none') {
    throw new BerthError('quota_exceeded', 'The profile asks for a network; members may not have one.', {
      quota: 'network',
      limit: 'none',
      requested: 'bridge',
    });
  }
}

export type QuotaName = 'environments' | 'concurrent_executions' | 'concurrent_builds' | 'concurrent_imports' | 'scope_output_bytes' | 'workspaces' | 'leases';

/** Refuses a member whose scope already uses `used` of a quota of `limit` (one more would exceed it). */
export function assertQuota(caller: Caller, quota: QuotaName, limit: number, used: number): void {
  if (!isMember(caller) || used < limit) return;
  throw new BerthError('quota_exceeded', `The scope is at its ${quota.replaceAll('_', ' ')} quota (${used} of ${limit}).`, {
    quota,
    limit,
    used,
  });
}

/** The output bytes an execution of `caller` may write, or undefined when it is not bounded (admin). */
export const outputLimitOf = (caller: Caller, policy: RolePolicy): number | undefined =>
  isMember(caller) ? policy.quotas.outputBytes : undefined;
