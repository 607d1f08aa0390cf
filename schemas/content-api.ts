/**
 * zod schemas of the Environments content chapter on the wire (seed 001 §2–5): file paths, the import and directory
 * bodies, build records, version lists and harnesses. `*_at` timestamps are Unix seconds (the seed's units);
 * `createdAt`/`updatedAt` are milliseconds. File and archive bodies are raw bytes, not JSON, so they have no schema.
 */
import { z } from 'zod';
import { resourceIdParam } from './api.ts';

/** A path relative to the environment root, percent-decoded from the URL; confinement is checked by the runtime. */
export const contentPathParam = z.string().min(1).max(4096);

export const filePathParams = z.strictObject({ id: resourceIdParam, path: contentPathParam });

export const directoryBody = z.strictObject({ path: contentPathParam });

export const importQuery = z.strictObject({
  /** Archives only (a JSON body says `replace` itself): clear the source first. */
  replace: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
});

export const gitImportBody = z.strictObject({
  git: z.strictObject({ url: z.string().min(1).max(2048), ref: z.string().min(1).max(256).optional() }),
  replace: z.boolean().optional(),
});

export const versionParams = z.strictObject({
  id: resourceIdParam,
  version: z.string().regex(/^[1-9]\d{0,8}$/, 'expected a version number').transform(Number),
});

const packageSchema = z.strictObject({ manager: z.enum(['npm', 'pip']), name: z.string(), version: z.string() });
const buildStatusSchema = z.enum(['building', 'ready', 'failed']);

export const fileTreeSchema = z.strictObject({
  files: z.strictObject({ count: z.number(), bytes: z.number() }),
  entries: z.array(z.strictObject({ path: z.string(), type: z.enum(['file', 'directory']), size: z.number() })),
});

export const fileWrittenSchema = z.strictObject({ path: z.string(), size: z.number() });
export const directoryMadeSchema = z.strictObject({ path: z.string(), created: z.boolean() });

export const importResultSchema = z.strictObject({
  files: z.number(),
  bytes: z.number(),
  skipped: z.number(),
  skippedReasons: z.array(z.strictObject({ reason: z.string(), count: z.number(), examples: z.array(z.string()) })),
  strippedPrefix: z.string().optional(),
});

export const buildRecordSchema = z.strictObject({
  object: z.literal('build'),
  environment: z.string(),
  version: z.number(),
  status: buildStatusSchema,
  started_at: z.number(),
  finished_at: z.number().nullable(),
  error: z.string(),
  log: z.string(),
  packages: z.array(packageSchema),
  size: z.number(),
  active: z.boolean(),
});

export const versionEntrySchema = z.strictObject({
  version: z.number(),
  status: buildStatusSchema,
  started_at: z.number(),
  finished_at: z.number().nullable(),
  packages: z.number(),
  size: z.number(),
  error: z.string(),
  active: z.boolean(),
});

export const versionListSchema = z.strictObject({
  environment: z.string(),
  active: z.number().nullable(),
  latest: z.number().nullable(),
  versions: z.array(versionEntrySchema),
});

const harnessName = z.string().trim().min(1).max(200);
const harnessBase = z.string().min(1).max(200);

export const createHarnessBody = z.strictObject({
  name: harnessName,
  base: harnessBase.optional(),
  environment: resourceIdParam.optional(),
});

export const updateHarnessBody = z.strictObject({
  name: harnessName.optional(),
  base: harnessBase.nullable().optional(),
  environment: resourceIdParam.nullable().optional(),
});

export const harnessSchema = z.strictObject({
  id: z.string(),
  object: z.literal('harness'),
  name: z.string(),
  base: z.string().nullable(),
  environment: z.string().nullable(),
  createdAt: z.number(),
  updatedAt: z.number(),
});
