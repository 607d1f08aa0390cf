/**
 * Opens the configured event store and turns the ways that can fail into clear errors: a SQLite file that is missing
 * (for commands that only read it), locked by another process, misplaced or not a store, or cannot be opened; an
 * EventStoreDB that is not reachable.
 */
import { existsSync, realpathSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { EventStore } from '../../store/event-store.ts';
import { openStore, sqliteFileOf } from '../../store/open-store.ts';

/** The SQLite store's file in a data directory (as open-store.ts places it). */
export const sqliteStoreFile = (dataDir: string): string => join(dataDir, 'events.sqlite3');

/**
 * The canonical file of a `sqlite:PATH` store (its directory's links resolved, and its own when it exists). Inside a
 * Berth data directory (one holding a `runtime-id`) only that directory's `events.sqlite3` is a store: anything
 * deeper is the runtime's own files or its tenants' managed workspaces, which member commands may write.
 */
export function canonicalStoreFile(file: string): string {
  let canonical: string;
  try {
    canonical = existsSync(file) ? realpathSync(file) : join(realpathSync(dirname(file)), basename(file));
  } catch (e) {
    throw new BerthError('invalid_request', `the store file ${file} cannot be resolved: ${(e as Error).message}`, { store: file });
  }
  for (let dir = dirname(canonical); ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'runtime-id')) && canonical !== sqliteStoreFile(dir)) {
      throw new BerthError('invalid_request', `the store file ${canonical} lies inside the data directory ${dir}, where only its events.sqlite3 is a store`, {
        store: canonical,
        dataDir: dir,
      });
    }
    if (dir === dirname(dir)) return canonical;
  }
}

export async function openConfiguredStore(
  settings: { store: string; dataDir: string },
  opts: { mustExist?: boolean } = {},
): Promise<EventStore> {
  const file = sqliteFileOf(settings.store, settings.dataDir);
  const spec = settings.store.startsWith('sqlite:') ? `sqlite:${canonicalStoreFile(file!)}` : settings.store;
  const where = file === undefined ? settings.store : sqliteFileOf(spec, settings.dataDir)!;
  if (file !== undefined && opts.mustExist && !existsSync(where)) {
    throw new BerthError('not_found', `no event store at ${where}: start \`berth serve\` there first, or pass --data-dir`, {
      store: where,
    });
  }
  let store: EventStore | undefined;
  try {
    store = await openStore(spec, settings.dataDir);
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
