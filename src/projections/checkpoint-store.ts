/**
 * Where projection checkpoints live: a small SQLite file (`<dataDir>/projections.sqlite3`) holding, per projection,
 * its position AND a snapshot of its state, written together in one transaction. That pairing is what makes resume
 * exact: a restart loads a state that reflects precisely the events up to the stored position, then reads on from
 * there, so no event is applied twice and none is missed. (A position alone would force a rebuild from zero anyway,
 * since the read models live in memory.) The file is separate from the event log so it works with either store.
 */
import Database from 'better-sqlite3';

export interface Checkpoint {
  name: string;
  version: number;
  position: bigint;
  /** v8.serialize of the state; absent in a save that only moves the position (state unchanged since last save). */
  state?: Buffer;
}

const schema = `
  CREATE TABLE IF NOT EXISTS checkpoints (
    name       TEXT    PRIMARY KEY,
    version    INTEGER NOT NULL,
    position   INTEGER NOT NULL,
    state      BLOB    NOT NULL,
    updated_at TEXT    NOT NULL
  );
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`;

export class CheckpointStore {
  private readonly db: Database.Database;

  private constructor(db: Database.Database) {
    this.db = db;
  }

  static open(file: string): CheckpointStore {
    const db = new Database(file);
    try {
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      db.defaultSafeIntegers(true);
      db.exec(schema);
      return new CheckpointStore(db);
    } catch (e) {
      db.close();
      throw e;
    }
  }

  load(name: string): Required<Checkpoint> | undefined {
    const row = this.db
      .prepare<[string], { version: bigint; position: bigint; state: Buffer }>(
        'SELECT version, position, state FROM checkpoints WHERE name = ?',
      )
      .get(name);
    return row && { name, version: Number(row.version), position: row.position, state: row.state };
  }

  /** Saves every checkpoint in one transaction. */
  save(checkpoints: Checkpoint[]): void {
    const now = new Date().toISOString();
    const upsert = this.db.prepare(
      `INSERT INTO checkpoints (name, version, position, state, updated_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET version = excluded.version, position = excluded.position,
         state = excluded.state, updated_at = excluded.updated_at`,
    );
    const move = this.db.prepare('UPDATE checkpoints SET position = ?, updated_at = ? WHERE name = ? AND version = ?');
    this.db.transaction(() => {
      for (const c of checkpoints) {
        if (c.state) upsert.run(c.name, c.version, c.position, c.state, now);
        else move.run(c.position, now, c.name, c.version);
      }
    })();
  }

  remove(name: string): void {
    this.db.prepare('DELETE FROM checkpoints WHERE name = ?').run(name);
  }

  /** The id of the first event of the log the checkpoints were taken from ('' before any). */
  logIdentity(): string {
    return this.db.prepare<[], { value: string }>("SELECT value FROM meta WHERE key = 'log'").get()?.value ?? '';
  }

  /** Records which log the checkpoints belong to; a different log drops them all (they would be meaningless). */
  adoptLog(identity: string): void {
    this.db.transaction(() => {
      if (this.logIdentity() !== identity) this.db.exec('DELETE FROM checkpoints');
      this.db.prepare("INSERT INTO meta (key, value) VALUES ('log', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(identity);
    })();
  }

  close(): void {
    this.db.close();
  }
}
