/** An Environment's profile (DESIGN §8 fixed shape): which provider runs it and with what limits. */
import { z } from 'zod';

/** The provider kinds a runtime registers (src/runtime/provider-registry.ts): the one place that names them. */
export const providerKindSchema = z.enum(['native', 'docker', 'remote']);
export type ProviderKind = z.infer<typeof providerKindSchema>;

/** Who owns an allocation's resource: borrowed (never destroyed, never idle-reclaimed) or managed (made and reclaimed). */
export const ownershipSchema = z.enum(['borrowed', 'managed']);
export type Ownership = z.infer<typeof ownershipSchema>;

/** How widely an Environment's allocation is shared (seed 000). */
export const reusePolicySchema = z.enum(['session', 'workspace', 'scope']);
export type ReusePolicy = z.infer<typeof reusePolicySchema>;

export const profileSchema = z.strictObject({
  provider: providerKindSchema.default('native'),
  image: z.string().min(1).max(512).optional(),
  memoryMb: z.number().int().min(16).max(1_048_576).optional(),
  cpus: z.number().positive().max(1024).optional(),
  pidsLimit: z.number().int().min(8).max(1_000_000).optional(),
  network: z.enum(['none', 'bridge']).optional(),
  idleSeconds: z.number().int().min(0).max(31_536_000).optional(),
  reuse: reusePolicySchema.optional(),
  /** native only: run commands under bubblewrap (read-only root, private /tmp, workspace writable). */
  contain: z.boolean().optional(),
  /** docker: MiB of the command's HOME, a writable tmpfs of its own (counted in memoryMb); default DEFAULT_HOME_MB. */
  homeMb: z.number().int().min(1).max(1_048_576).optional(),
  /**
   * docker: MiB of the allocation's workspace view at /workspace, a tmpfs staging volume (a hard bound, so a command
   * cannot fill the engine's disk); default DEFAULT_WORKSPACE_MB.
   */
  workspaceMb: z.number().int().min(1).max(1_048_576).optional(),
  /** remote: the name of an Execution Host the admin configured (BERTH_REMOTE_HOSTS, src/runtime/config.ts). */
  host: z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, 'must be a host name the admin configured ([a-z0-9-])').optional(),
  /** remote: which provider of the host runs it, its native one (default) or its local Docker engine (`berth host --docker`). */
  backend: z.enum(['native', 'docker']).optional(),
});

/** The size of a container command's HOME when the profile names none. */
export const DEFAULT_HOME_MB = 512;
/** The size of a container's workspace view when the profile names none. */
export const DEFAULT_WORKSPACE_MB = 1024;

export type Profile = z.infer<typeof profileSchema>;

/** A profile that asks for nothing, every field at its default: what a machine holds before its resource exists. */
export const emptyProfile: Profile = Object.freeze(profileSchema.parse({}));

/**
 * What events written before providers recorded their defaults imply: `environment.created`/`updated` without `reuse`
 * and `allocation.intended` without `ownership` were given these by their provider kind, so old streams replay as
 * they did. New events carry the provider's own answer (Provider.defaultReuse, Provider.ownership).
 */
export const defaultsBeforeRecorded = {
  native: { ownership: 'borrowed', reuse: 'scope' },
  docker: { ownership: 'managed', reuse: 'session' },
  remote: { ownership: 'borrowed', reuse: 'scope' },
} as const satisfies Record<ProviderKind, { ownership: Ownership; reuse: ReusePolicy }>;
