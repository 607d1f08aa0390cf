/**
 * `--store sqlite:PATH` pointed where no event store is: a text file, a FIFO, another program's database, another
 * data directory's read models (directly and through a link), /etc/passwd. Each is refused with `invalid_request`
 * before anything is written to the file or beside it; a new file in a plain directory, and a data directory's own
 * events.sqlite3, are stores.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteReadModelStore } from '../../src/projections/sqlite-read-model-store.ts';
import { loadConfig } from '../../src/runtime/config.ts';
import { openConfiguredStore } from '../../src/runtime/core/open-configured-store.ts';
import { berth, cleanEnv } from '../integration/cli-process.ts';

let root: string;
let ownDataDir: string;
let otherDataDir: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'berth-store-path-'));
  ownDataDir = join(root, 'own');
  otherDataDir = join(root, 'other');
  loadConfig({ dataDir: ownDataDir }, {});
  loadConfig({ dataDir: otherDataDir }, {}); // writes its runtime-id: a data directory
  SqliteReadModelStore.open(join(otherDataDir, 'projections.sqlite3')).close();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What a refusal must leave alone: the file's bytes and times, and its directory's entries. */
function fingerprint(file: string) {
  const stat = statSync(file);
  const dir = join(file, '..');
  const bytes = stat.isFile() ? createHash('sha256').update(readFileSync(file)).digest('hex') : '';
  return { bytes, mtime: stat.mtimeMs, size: stat.size, siblings: readdirSync(dir).sort() };
}

async function refused(file: string, reason: RegExp) {
  const before = fingerprint(file);
  const error = await openConfiguredStore({ store: `sqlite:${file}`, dataDir: ownDataDir }).then(
    (store) => store.close().then(() => undefined),
    (e: unknown) => e,
  );
  expect(error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(reason) });
  expect(fingerprint(file)).toEqual(before);
}

describe('a store path that is not a Berth event store', () => {
  it('should refuse a text file', async () => {
    const file = join(root, 'notes.txt');
    writeFileSync(file, 'not a database\n');
    await refused(file, /not a SQLite database/);
  });

  it('should refuse a FIFO without waiting for a writer', { timeout: 10_000 }, async () => {
    const file = join(root, 'pipe');
    execFileSync('mkfifo', [file]);
    await refused(file, /not a regular file/);
  });

  it("should refuse another program's SQLite database", async () => {
    const file = join(root, 'app.sqlite3');
    const db = new Database(file);
    db.exec('CREATE TABLE users (name TEXT)');
    db.close();
    await refused(file, /holds other tables \(users\)/);
  });

  it("should refuse another data directory's projections.sqlite3, directly and through a link", async () => {
    const projections = join(otherDataDir, 'projections.sqlite3');
    await refused(projections, /inside the data directory/);
    const link = join(root, 'looks-harmless.sqlite3');
    symlinkSync(projections, link);
    await refused(link, /inside the data directory/);
    // A copy outside any data directory is still not a store.
    const copy = join(root, 'projections-copy.sqlite3');
    writeFileSync(copy, readFileSync(projections));
    await refused(copy, /holds other tables/);
  });

  it('should refuse a new file deeper in a data directory (its workspaces and artifacts are not the log)', async () => {
    mkdirSync(join(otherDataDir, 'workspaces'), { recursive: true });
    const file = join(otherDataDir, 'workspaces', 'events.sqlite3');
    await expect(openConfiguredStore({ store: `sqlite:${file}`, dataDir: ownDataDir })).rejects.toMatchObject({ code: 'invalid_request' });
    expect(existsSync(file)).toBe(false);
  });

  it('should refuse /etc/passwd', async () => {
    await refused('/etc/passwd', /not a SQLite database/);
  });

  it('should refuse through the CLI with the message and exit 1, writing nothing', async () => {
    const before = fingerprint('/etc/passwd');
    const result = await berth(['events', '--store', 'sqlite:/etc/passwd', '--json'], cleanEnv({ BERTH_DATA_DIR: ownDataDir }));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/\/etc\/passwd is not a Berth event store: not a SQLite database/);
    expect(fingerprint('/etc/passwd')).toEqual(before);
  });

  it("should open a new file in a plain directory, and a data directory's own events.sqlite3", async () => {
    const fresh = join(root, 'shared', 'events.sqlite3');
    mkdirSync(join(root, 'shared'));
    const store = await openConfiguredStore({ store: `sqlite:${fresh}`, dataDir: ownDataDir });
    await store.append('probe-1', [{ id: '00000000-0000-4000-8000-000000000001', type: 'probe', data: {} }], { expectedRevision: 'no_stream' });
    await store.close();
    const again = await openConfiguredStore({ store: `sqlite:${fresh}`, dataDir: ownDataDir }, { mustExist: true });
    expect(await again.streamRevision('probe-1')).toBe(0n);
    await again.close();
  });

  it("should keep a store file and its log private to the server's user (contained commands see the host read-only)", async () => {
    mkdirSync(join(root, 'open-dir'), { mode: 0o755 });
    const file = join(root, 'open-dir', 'events.sqlite3');
    const store = await openConfiguredStore({ store: `sqlite:${file}`, dataDir: ownDataDir });
    await store.append('probe-2', [{ id: '00000000-0000-4000-8000-000000000002', type: 'probe', data: {} }], { expectedRevision: 'no_stream' });
    for (const f of [file, `${file}-wal`, `${file}-shm`]) expect(statSync(f).mode & 0o777, f).toBe(0o600);
    await store.close();
    // A store made readable by others (a copy, an umask) is narrowed again when it is opened.
    chmodSync(file, 0o644);
    await (await openConfiguredStore({ store: `sqlite:${file}`, dataDir: ownDataDir })).close();
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const otherLog = await openConfiguredStore({ store: `sqlite:${join(otherDataDir, 'events.sqlite3')}`, dataDir: ownDataDir });
    await otherLog.close();
  });
});
