/**
 * One runtime per data directory. The lock is a kernel lock: an exclusive SQLite transaction on
 * `<data-dir>/runtime.lock.sqlite3`, held open for the runtime's life (SQLite's POSIX lock, which the kernel drops
 * when the process dies, however it dies). Taking over a killed runtime's lock is therefore atomic: there is no stale
 * file to judge and remove, so two starters racing over a dead holder cannot both win. `<data-dir>/runtime.lock`
 * only names the holder (pid and start time) for the refusal's message.
 *
 * Two starters taking a free lock at the same instant can both be refused (sqlite-busy.ts; 27 of 100 tight races had
 * no winner), so a refused starter tries again for 250 ms: a real holder keeps its lock for its life, and that only
 * delays the refusal. It lives beside the store so that `berth host` takes it without loading the runtime.
 */
import Database from 'better-sqlite3';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import { isBusy, untilNotBusy } from './sqlite-busy.ts';

interface Holder {
  pid: number;
}

/** How long a starter tries again for a lock it was refused (a race with another starter, not a holder). */
const CONTEND_MS = 250;

export class DataDirLock {
  private constructor(
    private readonly db: Database.Database,
    private readonly holderFile: string,
  ) {}

  /** `holder`: what a refusal calls the process holding it, and what to do about it. */
  static async acquire(dataDir: string, holder = { name: 'Berth runtime', hint: 'talk to it with --url, or stop it first' }): Promise<DataDirLock> {
    await mkdir(dataDir, { recursive: true });
    const holderFile = join(dataDir, 'runtime.lock');
    // Each acquire opens its own connection: SQLite refuses a second exclusive lock in this process too.
    const db = new Database(join(dataDir, 'runtime.lock.sqlite3'), { timeout: 0 });
    try {
      untilNotBusy(() => db.exec('BEGIN EXCLUSIVE'), CONTEND_MS);
    } catch (e) {
      db.close();
      if (!isBusy(e)) throw e;
      throw busy(dataDir, (await readHolder(holderFile))?.pid, holder);
    }
    await writeFile(holderFile, `${JSON.stringify({ pid: process.pid } satisfies Holder)}\n`, { mode: 0o600 });
    return new DataDirLock(db, holderFile);
  }

  async release(): Promise<void> {
    if (!this.db.open) return;
    // The holder file is left: it names a pid that no longer holds anything, and the next holder rewrites it.
    this.db.exec('ROLLBACK');
    this.db.close();
  }
}

async function readHolder(file: string): Promise<Holder | undefined> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as Holder;
  } catch {
    return undefined;
  }
}

const busy = (dataDir: string, pid: number | undefined, holder: { name: string; hint: string }) =>
  new BerthError(
    'unavailable',
    `The data directory ${dataDir} is in use by another ${holder.name}${pid ? ` (pid ${pid})` : ''}; ${holder.hint}.`,
    { dataDir, ...(pid ? { pid } : {}) },
  );
