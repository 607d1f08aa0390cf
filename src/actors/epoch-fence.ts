/**
 * A runtime's own stream, `runtime-<runtimeId>`: its lifecycle as other runtimes sharing the store see it (DESIGN
 * §4 rule 8; issue #17). `runtime.started` fences a new epoch: appended at the exact expected revision, so of two
 * processes starting the same runtimeId at once exactly one wins (the other gets WrongExpectedVersion and must not
 * start). `runtime.serving` advertises where it answers, `runtime.stopped` a clean stop, and `runtime.retired` (by
 * another runtime, which then adopts its actors) that it owns nothing any more. Every one carries the epoch it
 * belongs to, so a start reads one event to know the next.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { CorruptEvent, type EventStore, type RecordedEvent } from '../store/event-store.ts';
import { isBerthError } from '../../schemas/errors.ts';
import { parseRuntimeEvent, RUNTIME_STARTED, runtimeEventSchemas, type RuntimeEventType } from '../../schemas/events/runtime.ts';

export const runtimeStreamOf = (runtimeId: string): string => `runtime-${runtimeId}`;

/** A runtime event's data, checked; a CorruptEvent when it is none. */
function decodeRuntimeEvent(event: RecordedEvent): NonNullable<ReturnType<typeof parseRuntimeEvent>> {
  const parsed = parseRuntimeEvent(event.type, event.data);
  if (!parsed) throw new CorruptEvent(event.stream, event.revision, 'not a runtime lifecycle event');
  return parsed;
}

/** The stream's last event (its revision and epoch), or undefined for a runtime never started. */
async function lastOf(store: EventStore, runtimeId: string): Promise<{ revision: bigint; epoch: number } | undefined> {
  try {
    const [event] = await store.readStream(runtimeStreamOf(runtimeId), { direction: 'backwards', maxCount: 1 });
    return event ? { revision: event.revision, epoch: decodeRuntimeEvent(event).data.epoch } : undefined;
  } catch (e) {
    if (isBerthError(e, 'not_found')) return undefined;
    throw e;
  }
}

/** Appends the next `runtime.started`; resolves with the new epoch (1 for a runtime's first start). */
export async function fenceEpoch(store: EventStore, runtimeId: string): Promise<number> {
  const last = await lastOf(store, runtimeId);
  const next = (last?.epoch ?? 0) + 1;
  const data = { epoch: next, at: Date.now(), pid: process.pid, hostname: hostname() };
  // A random id: a start is never retried, and two starts must never pass for one (same pid, same millisecond).
  await store.append(runtimeStreamOf(runtimeId), [{ id: randomUUID(), type: RUNTIME_STARTED, data }], {
    expectedRevision: last ? last.revision : 'no_stream',
  });
  return next;
}

/**
 * Appends a later lifecycle event of `runtimeId` at its current epoch: resolves false when the runtime was never
 * started, or started again since `epoch` (when given), and so the event would describe another incarnation.
 */
export async function recordRuntimeEvent(
  store: EventStore,
  runtimeId: string,
  type: Exclude<RuntimeEventType, typeof RUNTIME_STARTED>,
  fields: Record<string, unknown>,
  epoch?: number,
): Promise<boolean> {
  const last = await lastOf(store, runtimeId);
  if (!last || (epoch !== undefined && last.epoch !== epoch)) return false;
  const data = runtimeEventSchemas[type].parse({ ...fields, epoch: last.epoch, at: Date.now() });
  await store.append(runtimeStreamOf(runtimeId), [{ id: randomUUID(), type, data }], { expectedRevision: last.revision });
  return true;
}
