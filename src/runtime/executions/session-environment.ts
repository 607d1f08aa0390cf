/**
 * The environment a session created from a profile selects (seed 000, "Session, Workspace or Scope reuse"): the
 * profile's reuse policy, else its provider's default, decides whether sessions of the scope share one environment,
 * share one per workspace, or each get their own. Selecting never allocates: the environment is a catalog record
 * until a command needs compute, and then its one allocation is what the sessions sharing it share.
 */
import { createHash } from 'node:crypto';
import { profileSchema } from '../../../schemas/profile.ts';
import type { ReusePolicy } from '../../../schemas/profile.ts';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { Caller } from '../caller.ts';
import { slugOf, type EnvironmentService } from '../environments/environment-service.ts';

export interface ProfileSelection {
  environmentId: string;
  reuse: ReusePolicy;
}

/** JSON with sorted keys, so equal profiles give one key whatever order the caller wrote them in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b))) : v,
  );

export async function selectEnvironmentByProfile(
  environments: EnvironmentService,
  caller: Caller,
  asked: { profile: unknown; workspaceId: string | null; sessionId: string },
): Promise<ProfileSelection> {
  const parsed = profileSchema.safeParse(asked.profile);
  if (!parsed.success) throw new BerthError('invalid_request', 'The profile is not valid.', { issues: parsed.error.issues });
  // The profile as it would be recorded (a member's ceilings applied), so the key and the comparison below agree.
  const profile = environments.profileFor(caller, parsed.data);
  const reuse = environments.reusePolicyOf(profile);
  if (reuse === 'workspace' && !asked.workspaceId) {
    throw new BerthError('invalid_request', 'A profile with workspace reuse needs a workspace.', { reason: 'reuse_without_workspace' });
  }
  const sharedBy = reuse === 'session' ? asked.sessionId : reuse === 'workspace' ? asked.workspaceId : caller.scope;
  // The scope is in the key of every policy, so no two scopes ever derive one name (names are per scope anyway).
  const key = createHash('sha256').update(canonical([caller.scope, reuse, sharedBy, profile])).digest('hex').slice(0, 16);
  const name = `${reuse}-${key}`;
  try {
    const made = await environments.create(caller, { name, description: `Selected by ${reuse} reuse`, profile });
    return { environmentId: made.id, reuse };
  } catch (e) {
    // Another session made it first (or a concurrent create won the slug): select that one, if it is what we asked for.
    const found = isBerthError(e, 'environment_exists') ? environments.idOfSlug(caller.scope, slugOf(name)) : undefined;
    if (!found) throw e;
    const existing = await environments.get(caller, found);
    if (canonical(existing.profile) !== canonical(profile)) {
      throw new BerthError('environment_exists', `The environment "${name}" exists with another profile.`, { slug: name, reason: 'profile_mismatch' });
    }
    return { environmentId: found, reuse };
  }
}
