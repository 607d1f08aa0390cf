/**
 * Warm pools on a real Docker engine (issue 20): a claim hands out a ready pooled container, personalized and as
 * hardened as a cold one, whose first command runs with the environment's own variables; concurrent claims never
 * share a container and the pool's misses go cold; a claim shows the environment's content version, exactly and
 * read-only, and the next claim the version active then; a pool whose image is missing backs off, says why, and
 * leaves acquires failing fast with a typed error.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import type { Profile } from '../../schemas/profile.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import { LABEL, resourceNames } from '../../src/providers/docker/labels.ts';
import { contentVolumeSpec, poolContentDir } from '../../src/providers/docker/pool-content.ts';
import { allocationRef } from '../../src/runtime/environments/allocation.actor.ts';
import type { PoolSettings } from '../../src/runtime/pools/pool-config.ts';
import { MAX_ATTEMPTS_PER_MINUTE } from '../../src/runtime/pools/refill-backoff.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';
import { expectContainedCommands, expectHardened } from './docker-hardening.ts';
import { admin, testProviders } from './environments-berth.ts';
import { readAll, settled } from './executions-harness.ts';

const run = newTestRun();
let dir: string;
let berth: Berth | undefined;

const pool = (size: number, profile: Partial<Profile> = {}): PoolSettings => ({
  name: 'warm',
  profile: { provider: 'docker', memoryMb: 256, pidsLimit: 64, ...profile },
  size,
});

async function start(...pools: PoolSettings[]): Promise<Berth> {
  berth = await startBerth({
    settings: { dataDir: dir, store: 'sqlite', maintenanceMs: 60_000 },
    runtimeId: 'rt_pools_test',
    providers: testProviders(dir, { extraLabels: run }),
    warmPools: pools,
  });
  return berth;
}

const statusOf = (b: Berth) => b.api.pools(admin)[0];
/** Writes `files` into the environment's source and builds them into its next, active version. */
async function buildVersion(b: Berth, environmentId: string, files: Record<string, string>): Promise<number> {
  const content = b.api.content!;
  for (const [path, text] of Object.entries(files)) await content.writeFile(admin, environmentId, path, [Buffer.from(text)]);
  const { version } = await content.startBuild(admin, environmentId);
  const built = await waitFor(() => content.getBuild(admin, environmentId, version), { until: (r) => r.status !== 'building', timeoutMs: 60_000, what: `build ${version}` });
  expect(built).toMatchObject({ status: 'ready', active: true });
  return version;
}
/** Runs `script` in the environment to its end: its record and stdout. */
async function runIn(b: Berth, environmentId: string, script: string) {
  const x = await b.api.submitExecution(admin, { operationId: `run-${randomUUID()}`, environment: environmentId, command: ['/bin/sh', '-c', script] });
  return { record: await settled(b.api, x.id), stdout: (await readAll(b.api, x.id, 'stdout')).toString() };
}
/** What a command sees under /env: every path, and each file's bytes after its path. */
const LIST_ENV = 'cd /env && find . | sort | while read -r p; do if [ -f "$p" ]; then echo "$p $(cat "$p")"; else echo "$p"; fi; done';
const poolReady = (b: Berth, n: number) =>
  waitFor(() => statusOf(b), { until: (s) => s.ready >= n, timeoutMs: 60_000, what: `${n} pooled containers ready` });
const createDocker = (b: Berth, profile: Partial<Profile> = {}) =>
  b.api.createEnvironment(admin, { name: `pooled ${randomUUID().slice(0, 8)}`, profile: { provider: 'docker', ...profile } });
/** The containers the pool holds now (their allocations' owner is the pool). */
const pooledContainers = (b: Berth): string[] =>
  (b.runtime.projections.get('active-allocations')!.query.list() as { environmentId: string; state: string; identity: { resourceId: string } | null }[])
    .filter((a) => a.environmentId === 'hpool_warm' && a.state === 'ready' && a.identity)
    .map((a) => a.identity!.resourceId);

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-pools-'));
});
afterEach(async () => {
  await berth?.stop();
  berth = undefined;
  rmSync(dir, { recursive: true, force: true });
});
afterAll(() => removeTestResources(run));

describe.skipIf(!dockerAvailable)('Warm pools on Docker', () => {
  it('should hand out a ready, hardened pooled container whose first command runs with the environment\'s own env and limits', async () => {
    const b = await start(pool(1));
    await poolReady(b, 1);
    const [pooled] = pooledContainers(b);
    const env = await createDocker(b, { memoryMb: 128, pidsLimit: 48 });

    const a = await b.api.acquire(admin, env.id);
    expect(a).toMatchObject({ environmentId: env.id, generation: 1, state: 'ready', provider: 'docker' });
    expect(a.identity?.resourceId).toBe(pooled);
    expect(statusOf(b).claims).toEqual({ hit: 1, miss: 0, fallback: 0 });

    const info = await rawDocker.getContainer(pooled).inspect();
    expectHardened(info, { memoryMb: 128, pidsLimit: 48 });
    await expectContainedCommands(pooled);

    const x = await b.api.submitExecution(admin, {
      operationId: `first-${randomUUID()}`,
      environment: env.id,
      command: ['/bin/sh', '-c', 'echo "$GREETING from $(id -u)"'],
      env: { GREETING: 'hello-pool' },
    });
    expect(await settled(b.api, x.id)).toMatchObject({ status: 'exited', exitCode: 0, target: { allocationId: a.allocationId, generation: 1 } });
    const out = (await readAll(b.api, x.id, 'stdout')).toString();
    expect(out).toContain('hello-pool from 1000');

    // The pool makes another one in the background.
    await poolReady(b, 1);
    expect(pooledContainers(b)).not.toContain(pooled);
  });

  it('should give 20 concurrent claims on a pool of 5 five warm containers and 15 cold ones, never one container twice', async () => {
    // No networks: 20 containers and the refills at once would take most of the engine's bridge address pools.
    const b = await start(pool(5, { network: 'none' }));
    await poolReady(b, 5);
    const pooled = new Set(pooledContainers(b));
    expect(pooled.size).toBe(5);
    const envs = await Promise.all(Array.from({ length: 20 }, () => createDocker(b, { memoryMb: 256, pidsLimit: 64, network: 'none' })));

    const allocations = await Promise.all(envs.map((e) => b.api.acquire(admin, e.id)));
    const containers = allocations.map((a) => a.identity!.resourceId);
    expect(new Set(containers).size).toBe(20);
    expect(containers.filter((c) => pooled.has(c))).toHaveLength(5);
    expect(statusOf(b).claims).toEqual({ hit: 5, miss: 15, fallback: 0 });
    const metrics = await b.api.metrics(admin);
    expect(metrics).toMatch(/berth_pool_claims_total\{pool="warm",result="hit"\} 5/);
    expect(metrics).toMatch(/berth_pool_claims_total\{pool="warm",result="miss"\} 15/);
    expect(metrics).toMatch(/berth_allocate_seconds_count\{start="warm"\} 5/);
    expect(metrics).toMatch(/berth_pool_size\{pool="warm"\} 5/);
  });

  it('should never hand out a pooled container that died: the claim reconciles it, takes the next, and the pool replaces it', async () => {
    const b = await start(pool(2));
    await poolReady(b, 2);
    const [dead, alive] = pooledContainers(b);
    await rawDocker.getContainer(dead).kill();
    const envs = await Promise.all([createDocker(b), createDocker(b)]);

    const held = (await Promise.all(envs.map((e) => b.api.acquire(admin, e.id)))).map((a) => a.identity!.resourceId);
    expect(held).not.toContain(dead);
    expect(held).toContain(alive);
    expect(statusOf(b).claims).toEqual({ hit: 1, miss: 1, fallback: 0 });
    // The dead one is found lost, released (its container removed) and replaced.
    await waitFor(async () => (await rawDocker.listContainers({ all: true, filters: { id: [dead] } })).length, { until: (n) => n === 0, timeoutMs: 30_000, what: 'the dead container removed' });
    await poolReady(b, 2);
  });

  it('should show a claim the environment\'s content version, exactly and read-only, and the next claim the version active then', async () => {
    const b = await start(pool(2));
    await poolReady(b, 2);
    const pooled = pooledContainers(b);
    const env = await createDocker(b, { memoryMb: 256, pidsLimit: 64 });
    expect(await buildVersion(b, env.id, { 'marker.txt': 'one', 'bin/tool.sh': 'echo tool' })).toBe(1);

    const first = await b.api.acquire(admin, env.id);
    expect(pooled).toContain(first.identity!.resourceId);
    expect(statusOf(b).claims).toEqual({ hit: 1, miss: 0, fallback: 0 });
    const seen = await runIn(b, env.id, `${LIST_ENV}; echo "root=$PROJECT_ROOT"`);
    expect(seen.record).toMatchObject({ status: 'exited', exitCode: 0, version: 1, target: { allocationId: first.allocationId } });
    // Exactly the version's files, where a cold container's bind shows them, and nothing else.
    expect(seen.stdout.trim().split('\n')).toEqual(['.', `./${env.slug}`, `./${env.slug}/bin`, `./${env.slug}/bin/tool.sh echo tool`, `./${env.slug}/marker.txt one`, `root=/env/${env.slug}`]);

    // Read-only to the command: neither a file of the version nor /env itself can be changed.
    const writes = await runIn(b, env.id, `echo two > /env/${env.slug}/marker.txt || echo refused-file; mkdir /env/x || echo refused-dir; rm -f /env/${env.slug}/bin/tool.sh || echo refused-rm`);
    expect(writes.stdout).toContain('refused-file');
    expect(writes.stdout).toContain('refused-dir');
    expect(writes.stdout).toContain('refused-rm');
    expect(readFileSync(join(dir, 'environments', env.id, 'versions', '1', 'marker.txt'), 'utf8')).toBe('one');

    // The claim linked the version's files in (no copy): the volume binds a directory in the data dir, beside them.
    const { requestId } = await b.services.allocation(first.allocationId);
    const bound = join(poolContentDir(dir), resourceNames(requestId).content);
    expect(statSync(join(bound, env.slug, 'marker.txt')).ino).toBe(statSync(join(dir, 'environments', env.id, 'versions', '1', 'marker.txt')).ino);

    // Another version active: the allocation nothing uses is replaced, and the next claim shows that version.
    expect(await buildVersion(b, env.id, { 'marker.txt': 'two' })).toBe(2);
    const second = await b.api.acquire(admin, env.id);
    expect(second.allocationId).not.toBe(first.allocationId);
    expect(statusOf(b).claims).toMatchObject({ hit: 2, fallback: 0 });
    const next = await runIn(b, env.id, LIST_ENV);
    expect(next.record).toMatchObject({ status: 'exited', version: 2, target: { allocationId: second.allocationId } });
    expect(next.stdout).toContain(`./${env.slug}/marker.txt two`);
    expect(next.stdout).not.toContain('marker.txt one');
    // The replaced allocation's directory went with its volume.
    await waitFor(() => existsSync(bound), { until: (exists) => !exists, timeoutMs: 30_000, what: 'the released claim\'s content directory removed' });
  });

  it('should not fill a content volume whose bind names a directory other than the one made for it', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'berth-pools-elsewhere-'));
    try {
      const ref = { requestId: `hreq_${randomUUID()}`, allocationId: `halloc_${randomUUID()}`, environmentId: 'hpool_warm' };
      const names = resourceNames(ref.requestId);
      // Labelled as this allocation's, as the provider labels its own, but binding a directory of someone else's.
      const labels = { ...run, [LABEL.managed]: 'true', [LABEL.requestId]: ref.requestId, [LABEL.allocationId]: ref.allocationId };
      await rawDocker.createVolume(contentVolumeSpec(names, labels, elsewhere));
      const pooling = testProviders(dir, { extraLabels: run })[1]!.pooling!;
      await expect(pooling.applyContent(ref, { source: dir, target: '/env/x' })).rejects.toMatchObject({ code: 'unavailable' });
      expect(readdirSync(elsewhere)).toEqual([]);
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('should let a claimed container go when its version cannot be shown, never handing it out without it', async () => {
    const b = await start(pool(1));
    await poolReady(b, 1);
    const [pooled] = pooledContainers(b);
    const env = await createDocker(b, { memoryMb: 256, pidsLimit: 64 });
    await buildVersion(b, env.id, { 'marker.txt': 'one' });
    // The version's directory vanishes behind Berth's back: the claim is made, the fill cannot be.
    rmSync(join(dir, 'environments', env.id, 'versions', '1'), { recursive: true, force: true });

    const refused = await b.api.acquire(admin, env.id).catch((e) => e);
    // Then cold, whose bind of the missing directory the engine refuses: the typed error, not a container without it.
    expect(isBerthError(refused, 'environment_invalid'), String(refused)).toBe(true);
    expect(statusOf(b).claims.hit).toBe(0);
    // The container claimed for it is released and removed, and the pool makes another.
    await waitFor(async () => (await rawDocker.listContainers({ all: true, filters: { id: [pooled] } })).length, { until: (n) => n === 0, timeoutMs: 30_000, what: 'the claimed container removed' });
    await poolReady(b, 1);
  });

  it('should answer cold for a container with no content volume, changing nothing, and refuse to fill it', async () => {
    const b = await start(pool(1));
    // No pool fits HOME's size: made cold, its version (none yet) bound at create, with no content volume.
    const env = await createDocker(b, { homeMb: 128, memoryMb: 256, pidsLimit: 64 });
    const a = await b.api.acquire(admin, env.id);
    expect(statusOf(b).claims).toEqual({ hit: 0, miss: 0, fallback: 0 });
    const { identity, ...recorded } = await b.services.allocation(a.allocationId);
    const ref = allocationRef({ allocationId: a.allocationId, ...recorded, ...(identity ? { identity } : {}) });
    const pooling = b.services.providers.get('docker').pooling!;

    expect(await pooling.personalize(ref, { provider: 'docker', homeMb: 128, memoryMb: 128, pidsLimit: 32 }, true)).toBe('cold');
    const { HostConfig: limits } = await rawDocker.getContainer(a.identity!.resourceId).inspect();
    expect({ memory: limits.Memory, pids: limits.PidsLimit }).toEqual({ memory: 256 * 1024 * 1024, pids: 64 }); // untouched
    await expect(pooling.applyContent(ref, { source: dir, target: '/env/x' })).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('should back off refilling a pool whose image is missing, say why, and let an acquire fail fast with a typed error', async () => {
    const b = await start(pool(2, { image: 'berth-missing:latest' }));
    const failing = await waitFor(() => statusOf(b), { until: (s) => s.consecutiveFailures >= 3, timeoutMs: 30_000, what: 'three failed refills' });
    expect(failing.lastError).toMatch(/berth-missing:latest is not present/);
    // Once failing, one attempt at a time after a doubling delay (1 s, 2 s, 4 s): the first pass started both
    // missing members, each later attempt followed a failure; the refill loop itself passes twice a second.
    expect(failing.nextAttemptAt! - failing.lastErrorAt!).toBe(1_000 * 2 ** (failing.consecutiveFailures - 1));
    expect(failing.attemptsLastMinute).toBeLessThanOrEqual(failing.consecutiveFailures + 1);
    expect(failing.attemptsLastMinute).toBeLessThanOrEqual(MAX_ATTEMPTS_PER_MINUTE);
    expect(failing.ready).toBe(0);
    expect(await b.api.metrics(admin)).toMatch(/berth_pool_refill_failures_total\{pool="warm"\} [3-9]/);

    const env = await createDocker(b, { image: 'berth-missing:latest' });
    const started = Date.now();
    const refused = await b.api.acquire(admin, env.id).catch((e) => e);
    expect(isBerthError(refused, 'environment_invalid')).toBe(true);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(statusOf(b).claims.miss).toBe(1);
  });
});
