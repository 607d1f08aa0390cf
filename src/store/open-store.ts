/**
 * Picks the event store adapter from a spec: 'sqlite' (the embedded default, `<dataDir>/events.sqlite3`),
 * 'sqlite:/absolute/file' (a store file of its own, which several runtimes on one host may share) or an `esdb://` /
 * `eventstoredb://` URL for an EventStoreDB (KurrentDB) cluster.
 */
import { mkdirSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import type { EventStore } from './event-store.ts';
import { SqliteEventStore } from './sqlite-event-store.ts';

/** The shape used from ./eventstoredb-event-store.ts (named through a variable so this file compiles without it). */
interface EventStoreDbAdapterModule {
  EventStoreDbEventStore: { connect(url: string): EventStore | Promise<EventStore> };
}
const eventStoreDbModule = './eventstoredb-event-store.ts';

/** The SQLite file a spec names in `dataDir`, or undefined for a store that is not SQLite. */
export function sqliteFileOf(spec: string, dataDir: string): string | undefined {
  if (spec === '' || spec === 'sqlite') return join(dataDir, 'events.sqlite3');
  if (spec.startsWith('sqlite:')) return spec.slice('sqlite:'.length);
  return undefined;
}

export async function openStore(spec: string, dataDir: string): Promise<EventStore> {
  if (spec === '' || spec === 'sqlite') {
    mkdirSync(dataDir, { recursive: true });
    return SqliteEventStore.open(sqliteFileOf(spec, dataDir)!);
  }
  if (spec.startsWith('sqlite:')) {
    const file = sqliteFileOf(spec, dataDir)!;
    if (!isAbsolute(file)) throw new BerthError('invalid_request', `the store file ${file} must be an absolute path`, { spec });
    return SqliteEventStore.open(file);
  }
  if (/^(esdb|eventstoredb)(\+discover)?:\/\//.test(spec)) {
    // Loaded lazily: the gRPC client is only needed (and only loaded) when an EventStoreDB is configured.
    const adapter: EventStoreDbAdapterModule = await import(eventStoreDbModule);
    return adapter.EventStoreDbEventStore.connect(spec);
  }
  throw new BerthError('invalid_request', `unknown event store "${spec}": use "sqlite", "sqlite:/absolute/file" or an esdb:// URL`, { spec });
}
