/**
 * What the SQLite store may open: an absent file (a new store), an empty regular file, or a SQLite database whose only
 * tables are the store's own. Anything else (a FIFO, a device, a directory, a text file, another program's database,
 * Berth's read models) is refused before a byte is written to it or beside it. A store is kept private to its user.
 */
import { chmodSync, closeSync, constants, fstatSync, openSync, readSync, statSync } from 'node:fs';
import type Database from 'better-sqlite3';
import { BerthError } from '../../schemas/errors.ts';

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');
/** The store's tables (sqlite_sequence comes with AUTOINCREMENT). */
const STORE_TABLES = new Set(['events', 'sqlite_sequence']);

const notAStore = (file: string, reason: string) =>
  new BerthError('invalid_request', `${file} is not a Berth event store: ${reason}`, { store: file, reason });

/** Refuses, before SQLite opens it, a path that is neither absent, empty, nor a SQLite database file. */
export function assertStoreFileKind(file: string): void {
  let fd: number;
  try {
    // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW is not used, the caller resolved the path.
    fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw notAStore(file, (e as Error).message);
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw notAStore(file, 'not a regular file');
    if (stat.size === 0) return;
    const header = Buffer.alloc(SQLITE_HEADER.length);
    const read = readSync(fd, header, 0, header.length, 0);
    if (read < header.length || !header.equals(SQLITE_HEADER)) throw notAStore(file, 'not a SQLite database');
  } finally {
    closeSync(fd);
  }
}

/** Refuses a SQLite database holding tables other than the store's (read before anything is created in it). */
export function assertStoreSchema(db: Database.Database, file: string): void {
  const tables = db.prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'").all();
  const foreign = tables.map((t) => t.name).filter((name) => !STORE_TABLES.has(name));
  if (foreign.length > 0) throw notAStore(file, `it holds other tables (${foreign.slice(0, 5).join(', ')})`);
}

/**
 * Makes the store file and its log files mode 0600 (after the checks above passed): a `sqlite:PATH` store may lie
 * outside every data directory, where contained commands, which see the host read-only, could otherwise read every
 * tenant's events. SQLite gives the -wal and -shm files it creates later the database file's mode.
 */
export function keepStorePrivate(file: string): void {
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    let mode: number;
    try {
      mode = statSync(f).mode;
    } catch {
      continue; // a log file not made yet
    }
    if ((mode & 0o077) === 0) continue;
    try {
      chmodSync(f, 0o600);
    } catch (e) {
      throw new BerthError('invalid_request', `${f} is readable by other users and cannot be made private: ${(e as Error).message}`, { store: file });
    }
  }
}
