/**
 * The output streams of an execution (DESIGN §7): their names, as providers spool them, events size them and the
 * API, the WebSocket frames and the client name them. Every list of streams in the tree is this one.
 */
import { z } from 'zod';

export const outputStreamSchema = z.enum(['stdout', 'stderr', 'pty']);
export type OutputStream = z.infer<typeof outputStreamSchema>;

/** Every output stream, in frame-code order. */
export const outputStreams: readonly OutputStream[] = outputStreamSchema.options;

/** One optional `value` per output stream and no other key (a drained execution's sizes, its saved artifacts). */
export const perOutputStream = <T extends z.ZodType>(value: T) =>
  z.strictObject(Object.fromEntries(outputStreams.map((s) => [s, value.optional()])) as Record<OutputStream, z.ZodOptional<T>>);
