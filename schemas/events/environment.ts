/**
 * Events of the environment stream (`environment-<henv_…>`): the catalog record, the coalesced acquisition of its one
 * current allocation (reported back by the allocation actor), and its content versions (seed 001 §4): a build
 * requested, its outcome reported back by the build actor, and activations.
 */
import { z } from 'zod';
import { profileSchema, reusePolicySchema } from '../profile.ts';
import { resourceIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema, runtimeRecoveredSchema } from './runtime.ts';

export const environmentNameSchema = z.string().trim().min(1).max(200);
/** The mount path segment (`/env/<slug>`): lowercase words joined by single dashes. */
export const environmentSlugSchema = z.string().max(64).regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/, 'expected a lowercase slug');

const allocationIdField = { allocationId: resourceIdSchema };

/** A content version: 1, 2, … in build order. */
export const versionSchema = z.number().int().positive();
/** A failed build's reason as the environment keeps it (the build's own record has the whole log). */
export const BUILD_ERROR_MAX = 2048;

export const environmentEvents = {
  'environment.created': z.strictObject({
    name: environmentNameSchema,
    slug: environmentSlugSchema,
    scope: z.string().min(1),
    profile: profileSchema,
    /** The reuse policy: the profile's, else its provider's default (absent in events written before it was recorded). */
    reuse: reusePolicySchema.optional(),
    description: z.string().max(4096).optional(),
    entry: z.string().max(4096).optional(),
    at: atSchema,
  }),
  /** Only the fields given change; null clears description/entry. A new profile applies to later allocations only. */
  'environment.updated': z.strictObject({
    name: environmentNameSchema.optional(),
    slug: environmentSlugSchema.optional(),
    profile: profileSchema.optional(),
    /** With a new profile: its reuse policy, as in `environment.created`. */
    reuse: reusePolicySchema.optional(),
    description: z.string().max(4096).nullable().optional(),
    entry: z.string().max(4096).nullable().optional(),
    at: atSchema,
  }),
  'environment.deleted': z.strictObject({ at: atSchema }),
  /** A caller asks for a new allocation; `generation` must be the environment's last generation + 1. */
  'environment.acquisition_requested': z.strictObject({
    ...allocationIdField,
    requestId: resourceIdSchema,
    generation: z.number().int().positive(),
    /** The allocation is a warm pool's, ready already: it is claimed (allocation.claimed), not intended. */
    pooled: z.literal(true).optional(),
    at: atSchema,
  }),
  /** From the allocation actor: its provider reported it ready. */
  'environment.allocated': z.strictObject({ ...allocationIdField, generation: z.number().int().positive(), at: atSchema }),
  /** From the allocation actor: the provider confirmed absence after the request; nothing is allocated. */
  'environment.allocation_failed': z.strictObject({ ...allocationIdField, reason: z.string(), at: atSchema }),
  /** From the allocation actor: an acknowledged allocation is gone (absent) or fenced (restarted behind Berth's back). */
  'environment.allocation_lost': z.strictObject({ ...allocationIdField, reason: z.string(), at: atSchema }),
  /** From the allocation actor: it entered releasing (admission closed). */
  'environment.allocation_releasing': z.strictObject({ ...allocationIdField, at: atSchema }),
  /** From the allocation actor: the provider confirmed termination. */
  'environment.allocation_released': z.strictObject({ ...allocationIdField, at: atSchema }),
  /** A build of the next version (`latestVersion + 1`) starts; its effect creates the build actor. */
  'environment.build_requested': z.strictObject({ version: versionSchema, at: atSchema }),
  /** From the build actor (or recovery, when the build never started): the build's outcome. Ready activates it. */
  'environment.build_finished': z.strictObject({
    version: versionSchema,
    status: z.enum(['ready', 'failed']),
    error: z.string().max(BUILD_ERROR_MAX),
    packages: z.number().int().nonnegative(),
    sizeBytes: z.number().int().nonnegative(),
    /** When the build started (its actor's clock), so the summary says it even when requested long before. */
    startedAt: atSchema.optional(),
    at: atSchema,
  }),
  /** A finished (ready) version becomes the active one: a rollback, nothing is rebuilt. */
  'environment.version_activated': z.strictObject({ version: versionSchema, at: atSchema }),
  'runtime.recovered': runtimeRecoveredSchema,
};

export type EnvironmentEvent = EventUnion<typeof environmentEvents>;
