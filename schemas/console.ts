/** Wire shapes of the web console's two read routes: a machine's structure and one page of a stream's timeline. */
import { z } from 'zod';
import { contextDiffSchema, decimalQuery, recordedEventJsonSchema } from './api.ts';

export const machineKindParams = z.strictObject({ kind: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/, 'expected an actor type name') });

export const machineStructureSchema = z.strictObject({
  kind: z.string(),
  /** Dotted path of the initial state. */
  initial: z.string().nullable(),
  states: z.array(
    z.strictObject({
      path: z.string(),
      parent: z.string().nullable(),
      type: z.string(),
      initial: z.string().nullable(),
    }),
  ),
  transitions: z.array(
    z.strictObject({
      source: z.string(),
      event: z.string(),
      targets: z.array(z.string()),
      guard: z.string().nullable(),
      /** No target: the state stays (context or effects only). */
      internal: z.boolean(),
    }),
  ),
  events: z.array(z.string()),
});
export type MachineStructure = z.infer<typeof machineStructureSchema>;

/** Steps per timeline page: a default and a bound, so one request costs bounded work and memory. */
export const TIMELINE_LIMIT_DEFAULT = 100;
export const TIMELINE_LIMIT_MAX = 500;

export const timelineQuery = z.strictObject({
  from: decimalQuery(Number.MAX_SAFE_INTEGER).optional(),
  limit: decimalQuery(TIMELINE_LIMIT_MAX).pipe(z.number().min(1)).optional(),
  failures: z.enum(['true', 'false']).optional(),
});

export const timelinePageSchema = z.strictObject({
  stream: z.string(),
  actorType: z.string().nullable(),
  firstRevision: z.number(),
  lastRevision: z.number(),
  next: z.number().nullable(),
  steps: z.array(
    z.strictObject({
      event: recordedEventJsonSchema,
      stateBefore: z.unknown(),
      stateAfter: z.unknown(),
      contextDiff: contextDiffSchema,
    }),
  ),
});
