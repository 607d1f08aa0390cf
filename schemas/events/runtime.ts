/**
 * What every actor's events share: the clock reading they carry (`at`), and `runtime.recovered`, which the runtime
 * sends to each unfinished actor after rehydration (DESIGN §4 rule 7). Also the events of a runtime's own stream,
 * `runtime-<runtimeId>` (src/actors/epoch-fence.ts; issue #17): each start's epoch, where it serves, a clean stop,
 * and its retirement by another runtime, each with the epoch it belongs to.
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

export const RUNTIME_STARTED = 'runtime.started';
export const RUNTIME_SERVING = 'runtime.serving';
export const RUNTIME_STOPPED = 'runtime.stopped';
export const RUNTIME_RETIRED = 'runtime.retired';

const epoch = z.number().int().positive();

export const runtimeEventSchemas = {
  [RUNTIME_STARTED]: z.object({ epoch, at: atSchema, pid: z.number().int(), hostname: z.string() }),
  [RUNTIME_SERVING]: z.object({ epoch, at: atSchema, url: z.string().url() }),
  [RUNTIME_STOPPED]: z.object({ epoch, at: atSchema }),
  /** `by`: the runtime that retired it (and adopts its actors). */
  [RUNTIME_RETIRED]: z.object({ epoch, at: atSchema, by: z.string().min(1) }),
} as const;

export type RuntimeEventType = keyof typeof runtimeEventSchemas;

/** A runtime stream's event checked against its type's schema, or undefined when it is none of them. */
export function parseRuntimeEvent(type: string, data: unknown): { type: RuntimeEventType; data: { epoch: number; at: number } & Record<string, unknown> } | undefined {
  const schema = Object.hasOwn(runtimeEventSchemas, type) ? runtimeEventSchemas[type as RuntimeEventType] : undefined;
  const parsed = schema?.safeParse(data);
  return parsed?.success ? { type: type as RuntimeEventType, data: parsed.data } : undefined;
}
