/**
 * Epoch fencing (DESIGN §4 rule 8): a starting runtime appends `runtime.started` {epoch: previous + 1} to
 * `runtime-<runtimeId>` with the exact expected revision, so of two processes starting the same runtimeId at once
 * exactly one wins; the other gets WrongExpectedVersion and must not start.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { z } from 'zod';
import { CorruptEvent, type EventStore } from '../store/event-store.ts';
import { isBerthError } from '../../schemas/errors.ts';

export const RUNTIME_STARTED = 'runtime.started';

export const runtimeStartedSchema = z.object({
  epoch: z.number().int().positive(),
  at: z.number().int().nonnegative(),
  pid: z.number().int(),
  hostname: z.string(),
});

export const runtimeStreamOf = (runtimeId: string): string => `runtime-${runtimeId}`;

/** Appends the next `runtime.started`; resolves with the new epoch (1 for a runtime's first start). */
export async function fenceEpoch(store: EventStore, runtimeId: string): Promise<number> {
  const stream = runtimeStreamOf(runtimeId);
  let last: { revision: bigint; epoch: number } | undefined;
  try {
    const [event] = await store.readStream(stream, { direction: 'backwards', maxCount: 1 });
    if (event) {
      const parsed = runtimeStartedSchema.safeParse(event.data);
      if (event.type !== RUNTIME_STARTED || !parsed.success) {
        throw new CorruptEvent(stream, event.revision, 'not a runtime.started event');
      }
      last = { revision: event.revision, epoch: parsed.data.epoch };
    }
  } catch (e) {
    if (!isBerthError(e, 'not_found')) throw e;
  }
  const epoch = (last?.epoch ?? 0) + 1;
  const data = { epoch, at: Date.now(), pid: process.pid, hostname: hostname() };
  // A random id: a start is never retried, and two starts must never pass for one (same pid, same millisecond).
  await store.append(stream, [{ id: randomUUID(), type: RUNTIME_STARTED, data }], {
    expectedRevision: last ? last.revision : 'no_stream',
  });
  return epoch;
}
