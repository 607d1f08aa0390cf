/**
 * The runtimes sharing the event store (issue #17), from their `runtime-<id>` streams (schemas/events/runtime.ts):
 * each one's latest epoch, where it answers, and whether it serves, stopped or was retired. Requests for an actor
 * another runtime owns are sent to the URL found here; `GET /v1/runtimes` lists them.
 */
import type { RecordedEvent } from '../store/event-store.ts';
import {
  RUNTIME_RETIRED,
  RUNTIME_SERVING,
  RUNTIME_STARTED,
  RUNTIME_STOPPED,
  parseRuntimeEvent,
} from '../../schemas/events/runtime.ts';
import { defineProjection, table, type Tables } from './projection.ts';

export interface RuntimeRow {
  runtimeId: string;
  epoch: number;
  /** `started`: fenced, not listening yet (or a CLI command's in-process runtime). */
  state: 'started' | 'serving' | 'stopped' | 'retired';
  url: string | null;
  hostname: string;
  pid: number;
  startedAt: number;
  /** The runtime that retired it (and adopted its actors). */
  retiredBy: string | null;
}

const PREFIX = 'runtime-';

function reduce(t: Tables<{ runtimes: RuntimeRow }>, e: RecordedEvent): void {
  const event = parseRuntimeEvent(e.type, e.data);
  if (!event) return; // not a lifecycle event: nothing to show
  const runtimeId = e.stream.slice(PREFIX.length);
  const { data } = event;
  const row = t.runtimes.get(runtimeId);
  if (event.type === RUNTIME_STARTED) {
    const started = data as { epoch: number; at: number; hostname: string; pid: number };
    t.runtimes.put(runtimeId, {
      runtimeId,
      epoch: started.epoch,
      state: 'started',
      url: null,
      hostname: started.hostname,
      pid: started.pid,
      startedAt: started.at,
      retiredBy: null,
    });
    return;
  }
  if (!row || row.epoch !== data.epoch) return;
  if (event.type === RUNTIME_SERVING) t.runtimes.put(runtimeId, { ...row, state: 'serving', url: String(data.url) });
  // A retired runtime that stops afterwards stays retired: what it owned is another's now.
  else if (event.type === RUNTIME_STOPPED && row.state !== 'retired') t.runtimes.put(runtimeId, { ...row, state: 'stopped' });
  else if (event.type === RUNTIME_RETIRED) t.runtimes.put(runtimeId, { ...row, state: 'retired', retiredBy: String(data.by) });
}

export const runtimesProjection = defineProjection({
  name: 'runtimes',
  version: 1,
  filter: { streamPrefixes: [PREFIX] },
  tables: { runtimes: table<RuntimeRow>() },
  reduce,
  queries: {
    all: (t): RuntimeRow[] => t.runtimes.all(),
    get: (t, runtimeId: string): RuntimeRow | undefined => t.runtimes.get(runtimeId),
  },
});
