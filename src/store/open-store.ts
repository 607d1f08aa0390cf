/**
 * Picks the event store adapter from a spec: 'sqlite' (the embedded default, `<dataDir>/events.sqlite3`) or an
 * `esdb://` / `eventstoredb://` URL for an EventStoreDB (KurrentDB) cluster.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import type { EventStore } from './event-store.ts';
import { SqliteEventStore } from './sqlite-event-store.ts';

/** The shape used from ./eventstoredb-event-store.ts (named through a variable so this file compiles without it). */
interface EventStoreDbAdapterModule {
  EventStoreDbEventStore: { connect(url: string): EventStore | Promise<EventStore> };
}
const eventStoreDbModule = './eventstoredb-event-store.ts';

export async function openStore(spec: string, dataDir: string): Promise<EventStore> {
  if (spec === '' || spec === 'sqlite') {
    mkdirSync(dataDir, { recursive: true });
    return SqliteEventStore.open(join(dataDir, 'events.sqlite3'));
  }
  if (/^(esdb|eventstoredb)(\+discover)?:\/\//.test(spec)) {
    // Loaded lazily: the gRPC client is only needed (and only loaded) when an EventStoreDB is configured.
    const adapter: EventStoreDbAdapterModule = await import(eventStoreDbModule);
    return adapter.EventStoreDbEventStore.connect(spec);
  }
  throw new BerthError('invalid_request', `unknown event store "${spec}": use "sqlite" or an esdb:// URL`, { spec });
}
