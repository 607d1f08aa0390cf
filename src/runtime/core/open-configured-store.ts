/**
 * Opens the configured event store and turns the ways that can fail into clear errors: a SQLite file that is missing
 * (for commands that only read it), locked by another process, or cannot be opened; an EventStoreDB that is not
 * reachable.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { EventStore } from '../../store/event-store.ts';
import { openStore } from '../../store/open-store.ts';

/** The SQLite store's file in a data directory (as open-store.ts places it). */
export const sqliteStoreFile = (dataDir: string): string => join(dataDir, 'events.sqlite3');

export async function openConfiguredStore(
  settings: { store: string; dataDir: string },
  opts: { mustExist?: boolean } = {},
): Promise<EventStore> {
  const where = settings.store === 'sqlite' ? sqliteStoreFile(settings.dataDir) : settings.store;
  if (settings.store === 'sqlite' && opts.mustExist && !existsSync(where)) {
    throw new BerthError('not_found', `no event store at ${where}: start \`berth serve\` there first, or pass --data-dir`, {
      store: where,
    });
  }
  let store: EventStore | undefined;
  try {
    store = await openStore(settings.store, settings.dataDir);
    // Touch it once, so a store that connects lazily (a remote one, a locked file) fails here, not mid-command.
    await store.headPosition();
    return store;
  } catch (e) {
    await store?.close().catch(() => undefined);
    if (isBerthError(e) && e.code !== 'unavailable') throw e;
    const code = String((e as { code?: unknown }).code ?? '');
    const locked = code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
    const reason = locked ? 'it is locked by another process' : (e as Error).message;
    throw new BerthError('unavailable', `cannot open the event store ${where}: ${reason}`, { store: where }, { cause: e });
  }
}
