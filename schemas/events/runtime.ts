/**
 * What every actor's events share: the clock reading they carry (`at`), and `runtime.recovered`, which the runtime
 * sends to each unfinished actor after rehydration (DESIGN §4 rule 7).
 */
import { z } from 'zod';

/** When the fact happened, as its sender's clock read it, in milliseconds since the Unix epoch. Machines read no clock. */
export const atSchema = z.number().int().nonnegative();

/** A runtime `runtimeId` started at `epoch` and rehydrated this actor: in-flight calls of older epochs are gone. */
export const runtimeRecoveredSchema = z.strictObject({
  runtimeId: z.string().min(1),
  epoch: z.number().int().nonnegative(),
  at: atSchema,
});
