/**
 * A member growing the server's memory for good with ordinary executions (DESIGN §13: must not exhaust the server for
 * others). An execution's command may be as large as the 1 MiB JSON body, and the activity read model keeps each
 * execution's row, command included. A read-model table kept the last 4,096 rows it wrote or read parsed in memory,
 * counted in rows only, so every such execution kept about 1 MB of the server after it ended, up to 4 GB (a real
 * `berth serve` grew 3.9 MB of RSS per execution with ~960 KB commands: 570 MB after 150 of them). The cache now also
 * stops at 16 MiB of rows (by their JSON) per table. Measured on the table itself, with the garbage collector run
 * before each reading, so what is counted is what stays reachable. (The actor cache holds such an execution's
 * context as well; that holder is not covered here.)
 */
import Database from 'better-sqlite3';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import { table } from '../../src/projections/projection.ts';
import { SqliteTable } from '../../src/projections/sqlite-table.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const MB = 1_000_000;

interface Row {
  id: string;
  scope: string;
  command: string[];
}

function heapAfterGc(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

it('should keep at most 16 MiB of rows parsed in memory, however large the rows written and read', () => {
  const db = new Database(':memory:');
  const rows = new SqliteTable<Row>(db, 'executions', table<Row>({ columns: ['scope'], indexes: [['scope']] }));
  const before = heapAfterGc();
  const rowsWritten = 96;
  for (let i = 0; i < rowsWritten; i++) {
    // A fresh string each time, as each execution's command is its own.
    rows.put(`hexe_${i}`, { id: `hexe_${i}`, scope: 'alice', command: ['true', ...Array.from({ length: 16 }, () => `${i}`.padEnd(60_000, 'x'))] });
    if (i % 8 === 7) rows.flush();
  }
  rows.flush();
  const written = heapAfterGc() - before;
  // Reading them all back (a page walk) must not keep them either.
  let seen = 0;
  for (let after: number | undefined; ; ) {
    const page = rows.page({ where: { scope: 'alice' }, limit: 10, ...(after === undefined ? {} : { after }) });
    seen += page.rows.length;
    if (page.next === undefined) break;
    after = page.next;
  }
  const read = heapAfterGc() - before;
  console.log(`${rowsWritten} rows of ~960 KB: +${(written / MB).toFixed(1)} MB kept after writing, +${(read / MB).toFixed(1)} MB after reading them all`);
  expect(seen).toBe(rowsWritten);
  // Before: about 92 MB both times (every row kept). After: the 16 MiB budget and a row.
  expect(written).toBeLessThan(24 * MB);
  expect(read).toBeLessThan(24 * MB);
  // Rows evicted from the cache are still there, read back from SQLite.
  expect(rows.get('hexe_0')?.command[1]).toHaveLength(60_000);
  db.close();
});
