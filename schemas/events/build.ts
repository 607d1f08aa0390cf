/**
 * Events of the build stream (`build-<henv_…>-<version>`): one build of one content version (seed 001 §4), from the
 * request to ready or failed. The log is in the artifact store; events carry its digest and size (DESIGN §3).
 */
import { z } from 'zod';
import { profileSchema } from '../profile.ts';
import { environmentIdSchema } from '../ids.ts';
import { BUILD_ERROR_MAX, environmentSlugSchema, versionSchema } from './environment.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema, runtimeRecoveredSchema } from './runtime.ts';

const logSchema = z.strictObject({ digest: z.string().min(1), size: z.number().int().nonnegative() });

export const installedPackageSchema = z.strictObject({
  manager: z.enum(['npm', 'pip']),
  name: z.string().min(1).max(512),
  version: z.string().max(256),
});

/** Packages listed in one build's events, at most (a larger install keeps its count and the first ones). */
export const MAX_LISTED_PACKAGES = 5_000;

export const buildEvents = {
  /**
   * Sent by the environment's effect once `environment.build_requested` is durable. `runtimeId`/`epoch` name the
   * runtime that runs it: a later epoch recovering a build still `building` knows its installers died with it.
   */
  'build.requested': z.strictObject({
    environmentId: environmentIdSchema,
    version: versionSchema,
    scope: z.string().min(1),
    slug: environmentSlugSchema,
    profile: profileSchema,
    runtimeId: z.string().min(1),
    epoch: z.number().int().nonnegative(),
    at: atSchema,
  }),
  /** The installers succeeded and the version is read-only. */
  'build.succeeded': z.strictObject({
    log: logSchema,
    packages: z.array(installedPackageSchema).max(MAX_LISTED_PACKAGES),
    packageCount: z.number().int().nonnegative(),
    sizeBytes: z.number().int().nonnegative(),
    files: z.number().int().nonnegative(),
    at: atSchema,
  }),
  /** The snapshot or an installer failed (or the runtime that ran it stopped); the version directory is removed. */
  'build.failed': z.strictObject({
    error: z.string().min(1).max(BUILD_ERROR_MAX),
    log: logSchema.optional(),
    at: atSchema,
  }),
  'runtime.recovered': runtimeRecoveredSchema,
};

export type BuildEvent = EventUnion<typeof buildEvents>;
export type InstalledPackageJson = z.output<typeof installedPackageSchema>;
