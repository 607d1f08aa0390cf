/**
 * Events of the turn stream (`turn-<htrn_…>`, issue 13): the unit of serialized tool work on one storage. A turn is
 * opened once its storage is held, admits tool calls and shell executions until its gate closes, and is released
 * once no admitted call runs; it is never reopened.
 */
import { z } from 'zod';
import { resourceIdSchema } from '../ids.ts';
import type { EventUnion } from './event-map.ts';
import { atSchema } from './runtime.ts';

export const turnEvents = {
  'turn.opened': z.strictObject({
    scope: z.string().min(1),
    sessionId: resourceIdSchema,
    workspaceId: resourceIdSchema,
    generation: z.number().int().positive(),
    /** The ownership stream's key (so release and recovery need not re-derive it). */
    ownership: resourceIdSchema,
    at: atSchema,
  }),
  /**
   * A shell execution admitted in the turn (appended before it is accepted): the turn is released only once it is
   * terminal. `manifest` names the workspace manifest taken before it (an artifact digest), for its file history.
   */
  'turn.execution_admitted': z.strictObject({ executionId: resourceIdSchema, manifest: z.string().max(100).optional(), at: atSchema }),
  /** The execution's changes (after-manifest against before) are in the workspace history. */
  'turn.execution_recorded': z.strictObject({ executionId: resourceIdSchema, at: atSchema }),
  /** The gate closed: no new call is admitted. */
  'turn.closing': z.strictObject({ at: atSchema }),
  /** The storage was given back (or cleared by an admin): the turn is over for good. */
  'turn.released': z.strictObject({ cleared: z.boolean().optional(), at: atSchema }),
};

export type TurnEvent = EventUnion<typeof turnEvents>;
