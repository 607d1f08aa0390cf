/**
 * Events of the storage ownership stream (`ownership-<key>`, key derived from `{scope, storageId}`; seed 004
 * "Workspace turn ownership"): one holder (a turn) at a time, no timed takeover, conditional release, and an admin
 * clear that records the evidence that the holder's work stopped.
 */
import { z } from 'zod';
import { resourceIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema } from './runtime.ts';

export const ownershipEvents = {
  'ownership.acquired': z.strictObject({
    holder: resourceIdSchema,
    sessionId: resourceIdSchema,
    workspaceId: resourceIdSchema,
    scope: z.string().min(1),
    at: atSchema,
  }),
  'ownership.released': z.strictObject({ holder: resourceIdSchema, at: atSchema }),
  /** An admin cleared a holder whose work had physically stopped: `executions` were all terminal, none unknown. */
  'ownership.cleared': z.strictObject({
    holder: resourceIdSchema,
    executions: z.array(z.strictObject({ executionId: resourceIdSchema, status: z.string() })).max(10_000),
    at: atSchema,
  }),
  /** The storage's workspace is deleted: nobody can hold it again. */
  'ownership.retired': z.strictObject({ at: atSchema }),
};

export type OwnershipEvent = EventUnion<typeof ownershipEvents>;
