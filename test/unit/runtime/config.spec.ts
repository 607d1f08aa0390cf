/** Configuration: flags over environment over defaults, clear errors, and the identities kept in the data directory. */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, resolveRetention, resolveSettings } from '../../../src/runtime/config.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-config-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('config', () => {
  it('should use the documented defaults', () => {
    expect(resolveSettings({}, {})).toEqual({
      dataDir: resolve('.berth'),
      host: '127.0.0.1',
      port: 7420,
      store: 'sqlite',
      maintenanceMs: 15_000,
    });
  });

  it('should prefer flags to environment variables', () => {
    const env = { BERTH_DATA_DIR: '/env', BERTH_HOST: '0.0.0.0', BERTH_PORT: '8000', BERTH_EVENTSTORE_URL: 'esdb://db:2113' };
    expect(resolveSettings({}, env)).toMatchObject({ dataDir: '/env', host: '0.0.0.0', port: 8000, store: 'esdb://db:2113' });
    expect(resolveSettings({ dataDir: '/flag', port: '0', store: 'sqlite' }, env)).toMatchObject({
      dataDir: '/flag',
      port: 0,
      store: 'sqlite',
    });
  });

  it('should name every bad setting in one invalid_request error', () => {
    expect(() => resolveSettings({ port: 'eighty' }, { BERTH_EVENTSTORE_URL: 'postgres://x', BERTH_TOKEN: 'short' })).toThrow(
      expect.objectContaining({
        code: 'invalid_request',
        message: expect.stringMatching(/--port \/ BERTH_PORT.*--store \/ BERTH_EVENTSTORE_URL.*BERTH_TOKEN/),
      }),
    );
  });

  it('should take a shared store file as sqlite:/absolute/path, and refuse a relative one', () => {
    expect(resolveSettings({}, { BERTH_EVENTSTORE_URL: 'sqlite:/srv/berth/events.sqlite3' }).store).toBe('sqlite:/srv/berth/events.sqlite3');
    expect(resolveSettings({ store: 'sqlite:/a.sqlite3' }, {}).store).toBe('sqlite:/a.sqlite3');
    expect(() => resolveSettings({ store: 'sqlite:events.sqlite3' }, {})).toThrow(
      expect.objectContaining({ code: 'invalid_request', message: expect.stringMatching(/--store .*absolute path/) }),
    );
    expect(() => resolveSettings({ store: 'sqlite:' }, {})).toThrow(expect.objectContaining({ code: 'invalid_request' }));
  });

  it('should keep the runtime id and the generated token across loads, the token private', () => {
    const first = loadConfig({ dataDir: dir }, {});
    expect(first.tokenGenerated).toBe(true);
    expect(statSync(join(dir, 'token')).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dir, 'token'), 'utf8').trim()).toBe(first.token);
    const second = loadConfig({ dataDir: dir }, {});
    expect(second).toMatchObject({ token: first.token, tokenGenerated: false, runtimeId: first.runtimeId });
    expect(loadConfig({ dataDir: dir }, { BERTH_TOKEN: 'x'.repeat(20) }).token).toBe('x'.repeat(20));
  });
});

describe('retention settings', () => {
  it('should be off unless BERTH_RETENTION_DAYS is set, and take fractions of a day', () => {
    expect(resolveRetention('/srv/berth', {})).toBeUndefined();
    expect(resolveRetention('/srv/berth', { BERTH_RETENTION_DAYS: '0.5' })).toEqual({ days: 0.5 });
    expect(resolveRetention('/srv/berth', { BERTH_RETENTION_DAYS: '30', BERTH_RETENTION_ARCHIVE_DIR: '/archive/berth/' })).toEqual({
      days: 30,
      archiveDir: '/archive/berth',
    });
  });

  it('should name every bad retention setting', () => {
    const problems = (env: NodeJS.ProcessEnv) => {
      try {
        resolveRetention('/srv/berth', env);
      } catch (e) {
        return (e as { detail: { problems: string[] } }).detail.problems;
      }
      return [];
    };
    expect(problems({ BERTH_RETENTION_DAYS: '0' })).toEqual([expect.stringMatching(/^BERTH_RETENTION_DAYS: /)]);
    expect(problems({ BERTH_RETENTION_DAYS: 'soon' })).toEqual([expect.stringMatching(/^BERTH_RETENTION_DAYS: /)]);
    expect(problems({ BERTH_RETENTION_DAYS: '1', BERTH_RETENTION_ARCHIVE_DIR: 'relative/dir' })).toEqual([expect.stringMatching(/absolute/)]);
    for (const inside of ['/srv/berth', '/srv/berth/artifacts', '/srv/berth/../berth/x', '/srv', '/']) {
      expect(problems({ BERTH_RETENTION_DAYS: '1', BERTH_RETENTION_ARCHIVE_DIR: inside }), inside).toEqual([expect.stringMatching(/outside the data directory/)]);
    }
    expect(problems({ BERTH_RETENTION_ARCHIVE_DIR: '/archive' })).toEqual([expect.stringMatching(/needs BERTH_RETENTION_DAYS/)]);
  });
});
