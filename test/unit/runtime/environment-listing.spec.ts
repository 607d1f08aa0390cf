/**
 * Environment objects answered from the read models (catalog, active-allocation index, kept content summaries) over a
 * real runtime (SQLite file, native provider): read-your-writes, the same fields as the actors hold through acquire,
 * release, builds, activation and a restart, the file summary kept until the content API changes the source, and
 * scopes.
 */
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../../schemas/errors.ts';
import type { AllocationContext } from '../../../src/machines/allocation.machine.ts';
import type { EnvironmentContext } from '../../../src/machines/environment.machine.ts';
import { NativeProvider } from '../../../src/providers/native/native-provider.ts';
import { startBerth, type Berth } from '../../../src/runtime/berth.ts';
import { sqliteStoreFile } from '../../../src/runtime/core/open-configured-store.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';
import type { Caller } from '../../../src/runtime/runtime-api.ts';
import { waitFor } from '../../fixtures/wait-for.ts';

const admin: Caller = { scope: 'default', role: 'admin' };
let dir: string;
let berth: Berth | undefined;

async function start(): Promise<Berth> {
  berth = await startBerth({
    settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 60_000 },
    runtimeId: 'rt_env_listing',
    providers: [new NativeProvider({ dataDir: dir })],
  });
  return berth;
}

const content = (b: Berth) => b.api.content!;
const write = (b: Berth, id: string, path: string, text: string) => content(b).writeFile(admin, id, path, [Buffer.from(text)]);
const seconds = (ms: number | null) => (ms === null ? null : Math.floor(ms / 1000));

async function built(b: Berth, id: string): Promise<number> {
  const { version } = await content(b).startBuild(admin, id);
  expect(await buildEnds(b, id, version)).toMatchObject({ status: 'ready', error: '' });
  return version;
}

const buildEnds = (b: Berth, id: string, version: number) =>
  waitFor(() => content(b).getBuild(admin, id, version), { until: (r) => r.status !== 'building', timeoutMs: 30_000, intervalMs: 50, what: `build ${version} of ${id} to end` });

/** Every listed object (and each one by id) says what the environment's actor and its allocation's actor hold. */
async function expectAsTheActors(b: Berth, ids: string[]): Promise<void> {
  const listed = (await b.api.listEnvironments(admin)).items;
  expect(listed.map((v) => v.id)).toEqual(ids);
  for (const view of listed) {
    expect(await b.api.getEnvironment(admin, view.id)).toEqual(view);
    const env = (await b.runtime.actors.get<EnvironmentContext>('environment', view.id))!;
    const c = env.context;
    const allocation = c.acquisition ? await b.runtime.actors.get<AllocationContext>('allocation', c.acquisition.allocationId) : undefined;
    const last = c.versions.at(-1);
    expect(view).toMatchObject({
      name: c.name,
      slug: c.slug,
      mount: `/env/${c.slug}`,
      description: c.description ?? '',
      entry: c.entry ?? '',
      profile: c.profile,
      state: String(env.state),
      allocation: c.acquisition && allocation ? { allocationId: c.acquisition.allocationId, generation: c.acquisition.generation, state: String(allocation.state) } : null,
      createdAt: c.createdAt,
      updatedAt: c.updatedAt,
      status: c.activeVersion !== null ? 'ready' : c.building !== null ? 'building' : last?.status === 'failed' ? 'failed' : 'empty',
      version: c.activeVersion,
      latestVersion: c.latestVersion || null,
      versions: c.versions.map((v) => ({
        version: v.version,
        status: v.status,
        started_at: seconds(v.startedAt),
        finished_at: seconds(v.finishedAt),
        packages: v.packages,
        size: v.sizeBytes,
        error: v.error,
        active: v.version === c.activeVersion,
      })),
      build: last ? { version: last.version, status: last.status, started_at: seconds(last.startedAt), finished_at: seconds(last.finishedAt), error: last.error } : null,
    });
  }
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-env-listing-'));
});
afterEach(async () => {
  await berth?.stop();
  berth = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe('environment listing from the read models', () => {
  it('should show an event appended a moment ago to the very next list and get (read-your-writes)', async () => {
    const b = await start();
    const env = await b.api.createEnvironment(admin, { name: 'fresh' });
    expect(((await b.api.listEnvironments(admin)).items).map((e) => e.id)).toEqual([env.id]);
    const a = await b.api.acquire(admin, env.id);
    expect(((await b.api.catalog(admin)).items)[0]).toMatchObject({ state: 'allocated', allocation: { allocationId: a.allocationId, generation: 1, state: 'ready' } });
    await b.api.release(admin, env.id, a.allocationId);
    expect(((await b.api.catalog(admin)).items)[0]).toMatchObject({ state: 'idle', allocation: null });

    // Appended by another process sharing the log (this runtime's subscription hears of it only by polling): only
    // the read's wait for the log's head shows it at once.
    const other = await b.api.createEnvironment(admin, { name: 'written elsewhere' });
    const elsewhere = SqliteEventStore.open(sqliteStoreFile(dir));
    try {
      const updated = (data: Record<string, unknown>) =>
        elsewhere.append(`environment-${other.id}`, [{ id: randomUUID(), type: 'environment.updated', data: { ...data, at: Date.now() } }], {
          expectedRevision: 'any',
        });
      for (let i = 0; i < 5; i++) {
        await updated({ description: `take ${i}` });
        expect(((await b.api.listEnvironments(admin)).items)[1].description).toBe(`take ${i}`);
        await updated({ entry: `entry ${i}` });
        expect((await b.api.getEnvironment(admin, other.id)).entry).toBe(`entry ${i}`);
      }
    } finally {
      await elsewhere.close();
    }
  });

  it('should answer what the actors hold through acquire, release, builds, activation and a restart', async () => {
    let b = await start();
    const host = await b.api.createEnvironment(admin, { name: 'host', description: 'the host', entry: 'make' });
    const project = await b.api.createEnvironment(admin, { name: 'project', profile: { provider: 'native', idleSeconds: 60 } });
    const ids = [host.id, project.id];
    await expectAsTheActors(b, ids);

    const a = await b.api.acquire(admin, host.id);
    await expectAsTheActors(b, ids);
    await write(b, project.id, 'README.md', 'version one');
    expect(await built(b, project.id)).toBe(1);
    await expectAsTheActors(b, ids);
    await write(b, project.id, 'setup.sh', 'exit 3\n');
    const failed = await content(b).startBuild(admin, project.id);
    await buildEnds(b, project.id, failed.version);
    await expectAsTheActors(b, ids);
    await content(b).removePath(admin, project.id, 'setup.sh');
    expect(await built(b, project.id)).toBe(3);
    await content(b).activate(admin, project.id, 1);
    await b.api.updateEnvironment(admin, host.id, { name: 'host renamed', description: null as unknown as string });
    await expectAsTheActors(b, ids);
    await b.api.release(admin, host.id, a.allocationId);
    await expectAsTheActors(b, ids);
    const listed = (await b.api.listEnvironments(admin)).items;

    await b.stop();
    b = await start();
    await expectAsTheActors(b, ids);
    expect((await b.api.listEnvironments(admin)).items).toEqual(listed);
  });

  it('should keep the file summary until the content API changes the source, and walk no tree per read', async () => {
    const b = await start();
    const env = await b.api.createEnvironment(admin, { name: 'files' });
    const files = async () => (await b.api.getEnvironment(admin, env.id)).files;
    expect(await files()).toEqual({ count: 0, bytes: 0 });
    await write(b, env.id, 'a.txt', 'aaaa');
    expect(await files()).toEqual({ count: 1, bytes: 4 });
    await write(b, env.id, 'dir/b.txt', 'bb');
    expect(((await b.api.listEnvironments(admin)).items)[0].files).toEqual({ count: 2, bytes: 6 });
    await write(b, env.id, 'a.txt', 'a');
    expect(await files()).toEqual({ count: 2, bytes: 3 });

    // A file put there behind the API's back is not seen: reads answer the kept summary, they do not walk the tree.
    writeFileSync(join(dir, 'environments', env.id, 'source', 'stray.txt'), 'stray');
    expect(await files()).toEqual({ count: 2, bytes: 3 });
    await content(b).removePath(admin, env.id, 'dir');
    expect(await files()).toEqual({ count: 2, bytes: 6 }); // a.txt and the stray file, walked again after the change

    const scratch = mkdtempSync(join(tmpdir(), 'berth-env-listing-tar-'));
    try {
      writeFileSync(join(scratch, 'one.txt'), '1');
      writeFileSync(join(scratch, 'two.txt'), '22');
      execFileSync('tar', ['-cf', join(scratch, 'project.tar'), '-C', scratch, 'one.txt', 'two.txt']);
      await content(b).importArchive(admin, env.id, [readFileSync(join(scratch, 'project.tar'))], { replace: true });
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    expect(await files()).toEqual({ count: 2, bytes: 3 });

    await b.api.deleteEnvironment(admin, env.id);
    expect((await b.api.listEnvironments(admin)).items).toEqual([]);
    expect(isBerthError(await b.api.getEnvironment(admin, env.id).catch((e) => e), 'environment_not_found')).toBe(true);
  });

  it('should list a scope\'s environments to its callers only, and every scope\'s to the admin of *', async () => {
    const b = await start();
    const alice: Caller = { scope: 'alice', role: 'member' };
    const bob: Caller = { scope: 'bob', role: 'member' };
    const mine = await b.api.createEnvironment(alice, { name: 'shared name' });
    const theirs = await b.api.createEnvironment(bob, { name: 'shared name' });
    expect(((await b.api.listEnvironments(alice)).items).map((e) => e.id)).toEqual([mine.id]);
    expect(((await b.api.catalog(bob)).items).map((e) => e.id)).toEqual([theirs.id]);
    expect(((await b.api.listEnvironments({ scope: '*', role: 'admin' })).items).map((e) => e.id)).toEqual([mine.id, theirs.id]);
    for (const id of [theirs.id, 'henv_0123456789abcdef0123456789abcdef', 'not-an-id']) {
      expect(isBerthError(await b.api.getEnvironment(alice, id).catch((e) => e), 'environment_not_found')).toBe(true);
    }
  });
});
