/**
 * The read-model store on SQLite (`<dataDir>/projections.sqlite3`): one table per projection table and generation,
 * rows as JSON with their filter columns beside them, and the checkpoints. One long transaction is open between
 * commits: reads on this connection see its rows at once, a crash loses rows and positions together, and a commit
 * costs the rows changed since the last one, however long the history.
 */
import Database from 'better-sqlite3';
import type { Projection, Tables, TableSpec } from './projection.ts';
import type { ReadModelStore, SavedCheckpoint } from './read-model-store.ts';
import { SqliteTable } from './sqlite-table.ts';

const schema = `
  DROP TABLE IF EXISTS checkpoints;
  CREATE TABLE IF NOT EXISTS read_models (
    name       TEXT    PRIMARY KEY,
    version    INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    position   INTEGER NOT NULL
  );
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
`;

/** `rm_<projection>__<table>__<generation>`, identifier-safe. */
const prefixOf = (name: string) => `rm_${name.replace(/[^a-zA-Z0-9]/g, '_')}__`;

export class SqliteReadModelStore implements ReadModelStore {
  private readonly db: Database.Database;
  private readonly open = new Set<SqliteTable<unknown>>();

  private constructor(db: Database.Database) {
    this.db = db;
  }

  static open(file: string): SqliteReadModelStore {
    const db = new Database(file);
    try {
      db.pragma('busy_timeout = 5000');
      db.pragma('journal_mode = WAL');
      // Read models are rebuilt from the log: a commit lost to a power cut only costs replay.
      db.pragma('synchronous = NORMAL');
      db.pragma('cache_size = -16384');
      db.exec(schema);
      return new SqliteReadModelStore(db);
    } catch (e) {
      db.close();
      throw e;
    }
  }

  checkpoint(name: string): SavedCheckpoint | undefined {
    const row = this.db
      .prepare<[string], { version: bigint; generation: bigint; position: bigint }>(
        'SELECT version, generation, position FROM read_models WHERE name = ?',
      )
      .safeIntegers(true)
      .get(name);
    return row && { version: Number(row.version), generation: Number(row.generation), position: row.position };
  }

  tables<T>(projection: Projection<T>, generation: number): Tables<T> {
    const tables: Record<string, SqliteTable<unknown>> = {};
    for (const [key, spec] of Object.entries(projection.tables) as [string, TableSpec][]) {
      const t = new SqliteTable(this.db, `${prefixOf(projection.name)}${key}__${generation}`, spec);
      this.open.add(t);
      tables[key] = t;
    }
    return tables as Tables<T>;
  }

  drop(name: string, keep?: number): void {
    this.begin();
    const prefix = prefixOf(name);
    const names = this.db
      .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table'")
      .all()
      .map((r) => r.name)
      .filter((n) => n.startsWith(prefix) && (keep === undefined || !n.endsWith(`__${keep}`)));
    for (const n of names) this.db.exec(`DROP TABLE "${n}"`);
    for (const t of this.open) if (names.includes(t.sqlName)) this.open.delete(t);
    if (keep === undefined) this.db.prepare('DELETE FROM read_models WHERE name = ?').run(name);
  }

  write(fn: () => void): void {
    this.begin();
    fn();
  }

  setCheckpoint(name: string, c: SavedCheckpoint): void {
    this.begin();
    this.db
      .prepare(
        `INSERT INTO read_models (name, version, generation, position) VALUES (?, ?, ?, ?)
         ON CONFLICT (name) DO UPDATE SET version = excluded.version, generation = excluded.generation, position = excluded.position`,
      )
      .run(name, c.version, c.generation, c.position);
  }

  commit(): void {
    if (!this.db.inTransaction) return;
    for (const t of this.open) t.flush();
    this.db.exec('COMMIT');
  }

  logIdentity(): string {
    return this.db.prepare<[], { value: string }>("SELECT value FROM meta WHERE key = 'log'").get()?.value ?? '';
  }

  adoptLog(identity: string): void {
    const before = this.logIdentity();
    if (before === identity) return;
    this.begin();
    // Models built before the log had a first event are empty: they stay. Any other log's rows are meaningless here.
    if (before !== '') for (const { name } of this.db.prepare<[], { name: string }>('SELECT name FROM read_models').all()) this.drop(name);
    this.db.prepare("INSERT INTO meta (key, value) VALUES ('log', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value").run(identity);
    this.commit();
  }

  /** Closes without committing: rows the engine has not checkpointed go, with their positions (as in a crash). */
  close(): void {
    this.db.close();
  }

  private begin(): void {
    if (!this.db.inTransaction) this.db.exec('BEGIN');
  }
}
