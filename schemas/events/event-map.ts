/**
 * An actor type's event map: the zod schema of each event's data (without `type`), keyed by event type. The union
 * type a machine receives, `{type, ...data}`, is derived from it so schemas and machines cannot drift apart.
 */
import type { z } from 'zod';

export type EventMap = Record<string, z.ZodType>;

export type EventUnion<M extends EventMap> = {
  [K in keyof M & string]: { type: K } & z.output<M[K]>;
}[keyof M & string];
