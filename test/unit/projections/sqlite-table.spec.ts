/**
 * A read-model table on a real SQLite file: pages and listings hand out cached rows and read only the ones the cache
 * lacks, so what they answer must stay the table's current content through updates, deletes, a key written again
 * (a new place at the end) and more rows than the caches hold.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TableSpec } from '../../../src/projections/projection.ts';
import { SqliteTable } from '../../../src/projections/sqlite-table.ts';

interface Row {
  id: string;
  scope: string;
  n: number;
}

let dir: string;
let db: Database.Database;
const spec: TableSpec<Row> = { columns: ['scope'], indexes: [['scope']] };
const open = () => new SqliteTable<Row>(db, 'rows', spec);
const ids = (rows: Row[]) => rows.map((r) => r.id);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-table-'));
  db = new Database(join(dir, 'models.sqlite3'));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a read-model table', () => {
  it('pages the current rows of a filter in order through changes, deletes and a key written again', () => {
    const t = open();
    for (let i = 0; i < 6; i++) t.put(`r${i}`, { id: `r${i}`, scope: i % 2 ? 'odd' : 'even', n: i });
    expect(ids(t.page({ where: { scope: 'even' }, limit: 10 }).rows)).toEqual(['r0', 'r2', 'r4']);
    t.put('r2', { id: 'r2', scope: 'even', n: 20 });
    t.delete('r0');
    expect(t.page({ where: { scope: 'even' }, limit: 10 }).rows).toEqual([
      { id: 'r2', scope: 'even', n: 20 },
      { id: 'r4', scope: 'even', n: 4 },
    ]);
    // Written again after its delete, a key takes a new place at the end; moved to another scope, it leaves the first.
    t.put('r0', { id: 'r0', scope: 'even', n: 0 });
    t.put('r4', { id: 'r4', scope: 'odd', n: 4 });
    const first = t.page({ where: { scope: 'even' }, limit: 1 });
    expect(ids(first.rows)).toEqual(['r2']);
    expect(ids(t.page({ where: { scope: 'even' }, after: first.next, limit: 10 }).rows)).toEqual(['r0']);
    expect(ids(t.all({ scope: 'odd' }))).toEqual(['r1', 'r3', 'r4', 'r5']);
    expect(t.keys({ scope: 'odd' })).toEqual(['r1', 'r3', 'r4', 'r5']);
    expect(t.keys()).toEqual(['r1', 'r2', 'r3', 'r4', 'r5', 'r0']);
    expect(t.page({ where: { scope: 'odd' }, order: 'desc', limit: 2 }).rows.map((r) => r.n)).toEqual([5, 4]);
  });

  it('answers the same from a cold cache and past the size of its caches', () => {
    const t = open();
    const rows = 20_000;
    db.transaction(() => {
      for (let i = 0; i < rows; i++) t.put(`k${i}`, { id: `k${i}`, scope: 's', n: i });
      t.flush();
    })();
    t.put('k7', { id: 'k7', scope: 's', n: -7 });
    const walk = (table: SqliteTable<Row>) => {
      const seen: number[] = [];
      for (let page = table.page({ where: { scope: 's' }, limit: 1000 }); ; page = table.page({ where: { scope: 's' }, after: page.next, limit: 1000 })) {
        seen.push(...page.rows.map((r) => r.n));
        if (page.next === undefined) return seen;
      }
    };
    const expected = Array.from({ length: rows }, (_, i) => (i === 7 ? -7 : i));
    expect(walk(t)).toEqual(expected);
    expect(walk(t)).toEqual(expected); // again, now partly from the caches
    expect(walk(open())).toEqual(expected); // another instance on the same file: nothing cached
    expect(t.all().map((r) => r.n)).toEqual(expected);
  });
});
