/**
 * What the several-runtimes e2e reads straight from the shared event store (a `sqlite:PATH` file or the EventStoreDB
 * test server), beside the runtimes: who wrote what. An actor's owner at first is the runtime in its first event's
 * metadata; `crossWrites` lists every event one runtime wrote into a stream another one created.
 */
import type { RecordedEvent } from '../../src/store/event-store.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { BerthServer } from './berth-server.ts';

export async function runtimeIdOf(server: BerthServer): Promise<string> {
  return (await server.json<{ runtimeId: string }>('/healthz', { token: null })).runtimeId;
}

/** Every event of the store (its own streams; an EventStoreDB's `$…` streams left out), read in this process. */
export async function storeEvents(spec: string, scratchDir: string): Promise<RecordedEvent[]> {
  const store = await openStore(spec, scratchDir);
  try {
    return (await store.readAll()).filter((e) => !e.stream.startsWith('$'));
  } finally {
    await store.close();
  }
}

export const writerOf = (e: RecordedEvent): unknown => e.metadata.runtimeId;

/** Events written by `intruder` into streams whose first event `creator` wrote (as `stream type`). */
export function crossWrites(events: RecordedEvent[], creator: string, intruder: string): string[] {
  const firstWriter = new Map<string, unknown>();
  for (const e of events) if (!firstWriter.has(e.stream)) firstWriter.set(e.stream, writerOf(e));
  return events.filter((e) => firstWriter.get(e.stream) === creator && writerOf(e) === intruder).map((e) => `${e.stream} ${e.type}`);
}
