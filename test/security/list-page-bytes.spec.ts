/**
 * A list page is bounded in bytes as well as in items. An execution's row holds its command, which may be as large as
 * the 1 MiB JSON body: `GET /v1/executions?limit=1000` over such rows answered 31.7 MB with 33 of them (six such
 * requests at once took a real server 660 MB up), and would answer about 1 GB with a thousand. A read model's page
 * now ends once its rows (as stored) pass 8 MiB, at least one row, with the cursor of the next page (the README
 * already says a page may hold fewer than `limit` items). Measured on the table the list routes page.
 */
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { table } from '../../src/projections/projection.ts';
import { SqliteTable } from '../../src/projections/sqlite-table.ts';

interface Row {
  id: string;
  scope: string;
  command: string[];
}

const command = (i: number, bytes: number) => ['true', `${i}`.padEnd(bytes, 'x')];

function walk(rows: SqliteTable<Row>, limit: number): { pages: number[]; ids: string[] } {
  const pages: number[] = [];
  const ids: string[] = [];
  for (let after: number | undefined; ; ) {
    const page = rows.page({ where: { scope: 'alice' }, limit, ...(after === undefined ? {} : { after }) });
    pages.push(page.rows.length);
    ids.push(...page.rows.map((r) => r.id));
    if (page.next === undefined) return { pages, ids };
    after = page.next;
  }
}

it('should end a page once its rows pass 8 MiB, and the walk still sees every row once, in order', () => {
  const rows = new SqliteTable<Row>(new Database(':memory:'), 'executions', table<Row>({ columns: ['scope'], indexes: [['scope']] }));
  const ids = Array.from({ length: 40 }, (_, i) => `hexe_${String(i).padStart(2, '0')}`);
  ids.forEach((id, i) => rows.put(id, { id, scope: 'alice', command: command(i, 960_000) }));
  rows.flush();
  const { pages, ids: seen } = walk(rows, 1000);
  expect(Math.max(...pages)).toBeLessThanOrEqual(9); // 8 MiB of ~960 KB rows
  expect(pages.length).toBeGreaterThanOrEqual(5);
  expect(seen).toEqual(ids);
});

it('should hold a row larger than the bound alone, and small rows to the limit', () => {
  const rows = new SqliteTable<Row>(new Database(':memory:'), 'executions', table<Row>({ columns: ['scope'], indexes: [['scope']] }));
  rows.put('big', { id: 'big', scope: 'alice', command: command(0, 9_000_000) });
  for (let i = 0; i < 500; i++) rows.put(`small_${i}`, { id: `small_${i}`, scope: 'alice', command: command(i, 100) });
  rows.flush();
  const { pages, ids } = walk(rows, 1000);
  expect(pages).toEqual([1, 500]);
  expect(ids).toHaveLength(501);
});
