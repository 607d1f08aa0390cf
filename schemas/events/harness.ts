/**
 * Events of the harness stream (`harness-<hhrn_…>`, seed 001 §5): a named default for tasks, which may name the
 * environment they read. The reference is kept as written, even after that environment is deleted.
 */
import { z } from 'zod';
import { environmentIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema } from './runtime.ts';

export const harnessNameSchema = z.string().trim().min(1).max(200);
export const harnessBaseSchema = z.string().min(1).max(200);

export const harnessEvents = {
  'harness.created': z.strictObject({
    scope: z.string().min(1),
    name: harnessNameSchema,
    base: harnessBaseSchema.optional(),
    environmentId: environmentIdSchema.optional(),
    at: atSchema,
  }),
  /** Only the fields given change; null clears base or environment. */
  'harness.updated': z.strictObject({
    name: harnessNameSchema.optional(),
    base: harnessBaseSchema.nullable().optional(),
    environmentId: environmentIdSchema.nullable().optional(),
    at: atSchema,
  }),
  'harness.deleted': z.strictObject({ at: atSchema }),
};

export type HarnessEvent = EventUnion<typeof harnessEvents>;
