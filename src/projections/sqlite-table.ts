/**
 * One read-model table on SQLite: `seq` (insertion order, never reused, so a page cursor stays valid while rows come
 * and go), the key, the row as JSON, and one `c_<column>` per filter column, with the spec's indexes each ending in
 * `seq`. Writes stay in memory until the next query of the table or commit, so the many transitions of one execution
 * within a checkpoint interval cost one row write; recently used rows stay parsed in a bounded cache, and every read
 * hands out those cached objects (the projection changes them in place: callers read them, never change them).
 */
import type Database from 'better-sqlite3';
import type { ColumnValue, Page, PageRequest, Table, TableSpec, Where } from './projection.ts';
import { BoundedLru } from '../store/bounded-lru.ts';

const CACHE_ROWS = 4096;

/**
 * And at most this many bytes of rows (as their JSON): a row may be as large as what a member put in it (an execution
 * row holds its command, up to the 1 MiB JSON body), and 4,096 such rows kept 4 GB of the server for good.
 */
const CACHE_BYTES = 16 * 1024 * 1024;

/**
 * The most bytes of rows (as stored) one page holds; it ends early past them, at least one row, its cursor at the last
 * row it holds. A list of a thousand executions whose commands were 1 MB each was a 1 GB answer.
 */
const PAGE_BYTES = 8 * 1024 * 1024;

/** How many `seq` → key pairs are kept (forgotten all at once past it: they are learned again on the next read). */
const SEQ_KEYS = 4 * CACHE_ROWS;

interface Stored {
  seq: number;
  key: string;
  row: string;
}

const sqlValue = (v: unknown): ColumnValue => {
  if (v === undefined || v === null) return null;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'string' || typeof v === 'number') return v;
  throw new TypeError(`a filter column holds ${typeof v}; only strings, numbers, booleans and null`);
};

export class SqliteTable<R> implements Table<R> {
  private readonly columns: readonly string[];
  /** Parsed rows, each weighed by its JSON's length. */
  private readonly cache = new BoundedLru<R>(CACHE_ROWS, CACHE_BYTES);
  private readonly keyOfSeq = new Map<number, string>();
  /** Rows written since the last flush: a row, or null for a delete. Bounded by the engine's checkpoint interval. */
  private readonly dirty = new Map<string, R | null>();
  private readonly statements = new Map<string, Database.Statement>();
  private readonly getRow: Database.Statement<[string], { row: string }>;
  private readonly upsert: Database.Statement;
  private readonly remove: Database.Statement<[string]>;
  private readonly bySeqs: Database.Statement<[string]>;
  private readonly sizesBySeqs: Database.Statement<[string], [number, number]>;

  constructor(
    private readonly db: Database.Database,
    readonly sqlName: string,
    spec: TableSpec<R>,
  ) {
    this.columns = spec.columns ?? [];
    const cols = this.columns.map((c) => `"c_${c}"`);
    db.exec(
      `CREATE TABLE IF NOT EXISTS "${sqlName}" (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, row TEXT NOT NULL${cols.map((c) => `, ${c}`).join('')})`,
    );
    (spec.indexes ?? []).forEach((index, i) => {
      db.exec(`CREATE INDEX IF NOT EXISTS "${sqlName}__i${i}" ON "${sqlName}" (${index.map((c) => `"c_${c}"`).join(', ')}, seq)`);
    });
    this.getRow = db.prepare(`SELECT row FROM "${sqlName}" WHERE key = ?`);
    this.upsert = db.prepare(
      `INSERT INTO "${sqlName}" (key, row${cols.map((c) => `, ${c}`).join('')}) VALUES (?, ?${cols.map(() => ', ?').join('')})
       ON CONFLICT (key) DO UPDATE SET row = excluded.row${cols.map((c) => `, ${c} = excluded.${c}`).join('')}`,
    );
    this.remove = db.prepare(`DELETE FROM "${sqlName}" WHERE key = ?`);
    this.bySeqs = db.prepare(`SELECT seq, key, row FROM "${sqlName}" WHERE seq IN (SELECT value FROM json_each(?))`);
    this.sizesBySeqs = db.prepare<[string], [number, number]>(`SELECT seq, length(row) FROM "${sqlName}" WHERE seq IN (SELECT value FROM json_each(?))`).raw(true);
  }

  get(key: string): R | undefined {
    const written = this.dirty.get(key);
    if (written !== undefined) return written ?? undefined;
    const hit = this.cache.get(key);
    if (hit !== undefined) return hit;
    const found = this.getRow.get(key);
    if (!found) return undefined;
    const row = JSON.parse(found.row) as R;
    this.cache.set(key, row, found.row.length);
    return row;
  }

  put(key: string, row: R): void {
    this.dirty.set(key, row);
  }

  delete(key: string): void {
    this.dirty.set(key, null);
  }

  page({ where = {}, after, limit, order = 'asc' }: PageRequest<R>): Page<R> {
    this.flush();
    const [sql, args] = this.select(where, order, after);
    const seqs = this.seqs(`${sql} LIMIT ?`, [...args, limit + 1]);
    let more = seqs.length > limit;
    if (more) seqs.length = limit;
    const fit = this.fitting(seqs);
    if (fit < seqs.length) {
      seqs.length = fit;
      more = true;
    }
    return { rows: this.rowsOf(seqs), ...(more ? { next: seqs[seqs.length - 1] } : {}) };
  }

  /** How many of these rows, in order, fit PAGE_BYTES (at least one): sizes from the cache, else asked of SQLite. */
  private fitting(seqs: number[]): number {
    const known = seqs.map((seq) => {
      const key = this.keyOfSeq.get(seq);
      return key === undefined ? undefined : this.cache.weightOf(key);
    });
    const unknown = seqs.filter((_, i) => known[i] === undefined);
    const asked = unknown.length === 0 ? new Map<number, number>() : new Map(this.sizesBySeqs.all(JSON.stringify(unknown)));
    let bytes = 0;
    for (let i = 0; i < seqs.length; i++) {
      bytes += known[i] ?? asked.get(seqs[i]) ?? 0;
      if (bytes > PAGE_BYTES) return Math.max(1, i);
    }
    return seqs.length;
  }

  count(where: Where<R> = {}): number {
    this.flush();
    const [clause, args] = this.filter(where);
    return (this.statement(`SELECT count(*) AS n FROM "${this.sqlName}"${clause}`).get(...args) as { n: number }).n;
  }

  all(where: Where<R> = {}): R[] {
    this.flush();
    const [sql, args] = this.select(where, 'asc');
    return this.rowsOf(this.seqs(sql, args));
  }

  keys(where: Where<R> = {}): string[] {
    this.flush();
    const [clause, args] = this.filter(where);
    return this.statement(`SELECT key FROM "${this.sqlName}"${clause} ORDER BY seq ASC`).pluck(true).all(...args) as string[];
  }

  /** The `seq` of each row a query finds: a walk of the filter's index alone, no row read. */
  private seqs(sql: string, args: ColumnValue[]): number[] {
    return this.statement(sql).pluck(true).all(...args) as number[];
  }

  /**
   * The rows at these places, in order: parsed ones from the cache, the others read in one more query. A page asked
   * for again (a catalog under load) then costs an index walk, not the reading and parsing of every row. A `seq`
   * names one key for good (never reused), so what `keyOfSeq` learned stays true.
   */
  private rowsOf(seqs: number[]): R[] {
    const rows: R[] = new Array(seqs.length);
    const missing: number[] = [];
    for (let i = 0; i < seqs.length; i++) {
      const key = this.keyOfSeq.get(seqs[i]);
      const hit = key === undefined ? undefined : this.cache.get(key);
      if (hit !== undefined) rows[i] = hit;
      else missing.push(seqs[i]);
    }
    if (missing.length === 0) return rows;
    const read = new Map((this.bySeqs.all(JSON.stringify(missing)) as Stored[]).map((r) => [r.seq, r]));
    if (this.keyOfSeq.size + missing.length > SEQ_KEYS) this.keyOfSeq.clear();
    for (let i = 0; i < seqs.length; i++) {
      if (rows[i] !== undefined) continue;
      const { key, row } = read.get(seqs[i])!;
      rows[i] = JSON.parse(row) as R;
      this.cache.set(key, rows[i], row.length);
      this.keyOfSeq.set(seqs[i], key);
    }
    return rows;
  }

  /** Writes the rows changed since the last flush into the open transaction (the store commits them). */
  flush(): void {
    if (this.dirty.size === 0) return;
    for (const [key, row] of this.dirty) {
      if (row === null) {
        this.remove.run(key);
        this.cache.delete(key);
      } else {
        const r = row as Record<string, unknown>;
        const json = JSON.stringify(row);
        this.upsert.run(key, json, ...this.columns.map((c) => sqlValue(r[c])));
        this.cache.set(key, row, json.length);
      }
    }
    this.dirty.clear();
  }

  private select(where: Where<R>, order: 'asc' | 'desc', after?: number): [string, ColumnValue[]] {
    const [clause, args] = this.filter(where, after === undefined ? undefined : [order === 'asc' ? '>' : '<', after]);
    return [`SELECT seq FROM "${this.sqlName}"${clause} ORDER BY seq ${order === 'asc' ? 'ASC' : 'DESC'}`, args];
  }

  private filter(where: Where<R>, seq?: ['>' | '<', number]): [string, ColumnValue[]] {
    const terms: string[] = [];
    const args: ColumnValue[] = [];
    for (const [column, value] of Object.entries(where) as [string, ColumnValue | readonly ColumnValue[] | undefined][]) {
      if (value === undefined) continue;
      if (!this.columns.includes(column)) throw new Error(`table ${this.sqlName} has no filter column ${column}`);
      const values = Array.isArray(value) ? value : [value as ColumnValue];
      if (values.length === 0) return [' WHERE 0', []];
      if (values.length === 1 && values[0] === null) terms.push(`"c_${column}" IS NULL`);
      else terms.push(values.length === 1 ? `"c_${column}" = ?` : `"c_${column}" IN (${values.map(() => '?').join(', ')})`);
      for (const v of values) if (!(values.length === 1 && v === null)) args.push(sqlValue(v));
    }
    if (seq) {
      terms.push(`seq ${seq[0]} ?`);
      args.push(seq[1]);
    }
    return [terms.length > 0 ? ` WHERE ${terms.join(' AND ')}` : '', args];
  }

  private statement(sql: string): Database.Statement {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)));
    return s;
  }
}
