/**
 * The states callers see: an execution's status and an environment's allocation state. The machines that produce
 * them, the read models that fold them and the API that shows them all take the names from here.
 */
import { z } from 'zod';

/** The execution record's `status` (DESIGN §8); the last four are terminal. */
export const executionStatusSchema = z.enum(['accepted', 'running', 'exited', 'cancelled', 'failed', 'unknown']);
export type ExecutionStatus = z.infer<typeof executionStatusSchema>;
export const terminalStatuses: ReadonlySet<ExecutionStatus> = new Set(['exited', 'cancelled', 'failed', 'unknown']);

/**
 * The environment's allocation lifecycle (`state` of the environment object): the environment machine's live states.
 * `idle`: nothing allocated (a new acquisition may start); `lost`: the allocation is gone under it.
 */
export const environmentStateSchema = z.enum(['idle', 'acquiring', 'allocated', 'releasing', 'lost']);
export type EnvironmentState = z.infer<typeof environmentStateSchema>;
