/**
 * Retention from a hostile tenant's side: a member can neither run a pass nor set the policy (it is the admin's
 * environment, and no request changes it); another tenant's compacted execution stays out of reach; and the archive
 * directory cannot lead aged output into the data directory, neither by configuration, nor through a link standing
 * for the directory or planted inside it.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { ArtifactArchive } from '../../src/store/artifact-archive.ts';
import { ArtifactStore } from '../../src/store/artifact-store.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { berth, cleanEnv } from '../integration/cli-process.ts';

const AGE_MS = 2_000;

describe('retention: who may run it and what it exposes', () => {
  let server: BerthServer;
  let archiveDir: string;

  beforeAll(async () => {
    archiveDir = join(mkdtempSync(join(tmpdir(), 'berth-retention-sec-')), 'archive');
    server = await startServer([], {
      BERTH_RETENTION_DAYS: String(AGE_MS / 86_400_000),
      BERTH_RETENTION_ARCHIVE_DIR: archiveDir,
      BERTH_MAINTENANCE_MS: '3600000',
    });
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    rmSync(join(archiveDir, '..'), { recursive: true, force: true });
  });

  it('should refuse a member a pass, with or without a policy in the body, and change nothing', async () => {
    const env = await createEnvironment(server);
    const x = await submit(server, env, 'echo member-secret');
    await finished(server, x.id);
    await waitFor(() => server.json(`/v1/executions/${x.id}`), { until: (r) => r.step === 'released', timeoutMs: 30_000, what: 'released' });
    await new Promise((r) => setTimeout(r, AGE_MS + 300));
    const refused = await server.call('/v1/retention/run', { method: 'POST' });
    expect([refused.status, (await refused.json()).error.code]).toEqual([403, 'forbidden']);
    // A request carries no policy: one that tries is refused whoever sends it.
    for (const body of [{ days: 0 }, { archiveDir: '/' }]) {
      for (const token of [tokens.alice, tokens.admin]) {
        const answer = await server.call('/v1/retention/run', { method: 'POST', body, token });
        expect([answer.status, (await answer.json()).error.code]).toEqual([400, 'invalid_request']);
      }
    }
    // Nothing ran: the member's execution still has its output.
    const output = await server.call(`/v1/executions/${x.id}/output?stream=stdout&cursor=0`);
    expect([output.status, await output.text()]).toEqual([200, 'member-secret\n']);
    expect((await server.json(`/v1/executions/${x.id}`)).step).toBe('released');

    const report = await server.json('/v1/retention/run', { method: 'POST', token: tokens.admin });
    expect(report.compacted).toBeGreaterThanOrEqual(1);
    // Another tenant finds neither the compacted record, nor its stream, nor its output.
    for (const path of [`/v1/executions/${x.id}`, `/v1/streams/execution-${x.id}`, `/v1/executions/${x.id}/output?stream=stdout&cursor=0`]) {
      const answer = await server.call(path, { token: tokens.bob });
      expect(answer.status, path).toBe(404);
    }
    const own = await server.call(`/v1/executions/${x.id}/output?stream=stdout&cursor=0`);
    expect([own.status, (await own.json()).error.code]).toEqual([410, 'output_expired']);
  }, 120_000);
});

describe('retention: the archive directory stays outside the data directory', () => {
  let root: string;

  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'berth-retention-archive-'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('should refuse to start with an archive inside, around or relative to the data directory', async () => {
    const dataDir = join(root, 'data');
    for (const archive of [join(dataDir, 'artifacts'), dataDir, root, 'archive']) {
      const out = await berth(['serve', '--data-dir', dataDir, '--port', '0'], cleanEnv({ BERTH_RETENTION_DAYS: '30', BERTH_RETENTION_ARCHIVE_DIR: archive }));
      expect(out.code, archive).not.toBe(0);
      expect(out.stderr, archive).toMatch(/BERTH_RETENTION_ARCHIVE_DIR/);
    }
  }, 120_000);

  /** A data directory with one aged artifact, and the archive named `archive` (made by `lay`). */
  async function agedArtifact(name: string, lay: (archive: string, dataDir: string) => void) {
    const dataDir = join(root, `${name}-data`);
    const artifacts = new ArtifactStore(join(dataDir, 'artifacts'));
    const ref = await artifacts.putBytes(Buffer.from(`aged output of ${name}\n`));
    const archive = join(root, `${name}-archive`);
    lay(archive, dataDir);
    return { dataDir, artifacts, ref, archive: new ArtifactArchive(archive, [dataDir]) };
  }

  it('should move nothing when the archive directory is a link into the data directory', async () => {
    const a = await agedArtifact('linked', (archive, dataDir) => symlinkSync(join(dataDir, 'artifacts'), archive));
    const e = await a.artifacts.expire(a.ref, Date.now() + 60_000, a.archive).catch((err: unknown) => err);
    expect(isBerthError(e, 'forbidden'), String(e)).toBe(true);
    expect(await a.artifacts.has(a.ref)).toBe(true);
    expect(readdirSync(join(a.dataDir, 'artifacts')).filter((f) => f.startsWith('.tmp-'))).toEqual([]);
  });

  it('should write nothing through a link planted inside the archive', async () => {
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    const a = await agedArtifact('planted', (archive) => mkdirSync(archive));
    const hex = a.ref.digest.slice(7);
    symlinkSync(elsewhere, join(a.archive.root, hex.slice(0, 2)));
    const e = await a.artifacts.expire(a.ref, Date.now() + 60_000, a.archive).catch((err: unknown) => err);
    expect(isBerthError(e, 'forbidden'), String(e)).toBe(true);
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(await a.artifacts.has(a.ref)).toBe(true);
  });

  it('should replace, not follow, a link planted where the archived file goes', async () => {
    const target = join(root, 'victim');
    writeFileSync(target, 'untouched');
    const a = await agedArtifact('file-link', (archive) => mkdirSync(archive));
    const hex = a.ref.digest.slice(7);
    mkdirSync(join(a.archive.root, hex.slice(0, 2)));
    symlinkSync(target, a.archive.pathOf(a.ref.digest));
    expect(await a.artifacts.expire(a.ref, Date.now() + 60_000, a.archive)).toBe('archived');
    expect((await import('node:fs')).readFileSync(target, 'utf8')).toBe('untouched');
    expect((await import('node:fs')).readFileSync(a.archive.pathOf(a.ref.digest), 'utf8')).toBe('aged output of file-link\n');
  });
});
