/**
 * Seed 001 §2–3 end to end against a real `berth serve`: the environment object, the files endpoints (bytes as sent,
 * percent-decoded paths, confinement, file_too_large without truncation), imports (tar, tar.gz, zip, git; wrapper
 * stripping, replace) and the archive attack list, each member refused or dropped and counted, nothing outside.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { craftTar, memberHead, tarHeader, type CraftedMember } from '../unit/content/crafted-tar.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';
import { answer, createNamed, expectError, putFile, send } from './content-client.ts';

const MAX_FILE = 256 * 1024;
let server: BerthServer;
let scratch: string;

beforeAll(async () => {
  server = await startServer([], { BERTH_MAX_FILE_BYTES: String(MAX_FILE), BERTH_GIT_ALLOW_LOCAL: '1' });
  scratch = mkdtempSync(path.join(tmpdir(), 'berth-content-e2e-'));
});
afterAll(async () => {
  await server?.close();
  rmSync(scratch, { recursive: true, force: true });
});

const envDir = (id: string) => path.join(server.dataDir, 'environments', id);
const tree = (id: string, token = tokens.alice) => server.json(`/v1/environments/${id}/files`, { token });
const paths = async (id: string) => (await tree(id)).entries.map((e: { path: string }) => e.path);

/** The same request bytes as written, without fetch normalising `..` segments away. */
function rawRequest(method: string, urlPath: string, body = ''): Promise<{ status: number; body: any }> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path: urlPath, headers: { authorization: `Bearer ${tokens.alice}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString() || 'null') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function gzip(parts: () => Generator<Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of Readable.from(parts()).pipe(createGzip({ level: 9 }))) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Nothing an attack names exists outside the environment, and its directory holds only what Berth keeps there. */
function expectConfined(id: string): void {
  expect(readdirSync(envDir(id)).every((n) => ['source', 'staging', 'versions'].includes(n))).toBe(true);
  if (existsSync(path.join(envDir(id), 'staging'))) expect(readdirSync(path.join(envDir(id), 'staging'))).toEqual([]);
  for (const outside of ['/abs', '/evil', '/etc/berth-evil', path.join(server.dataDir, 'evil'), path.join(server.dataDir, 'environments', 'evil')]) {
    expect(existsSync(outside), outside).toBe(false);
  }
}

describe('the environment object (seed 001 §2)', () => {
  it('should create an environment with slug, mount, status empty and the content fields, next to its profile', async () => {
    const env = await createNamed(server, 'Content Studio');
    expect(env).toMatchObject({
      object: 'environment',
      name: 'Content Studio',
      slug: 'content-studio',
      mount: '/env/content-studio',
      status: 'empty',
      version: null,
      latestVersion: null,
      files: { count: 0, bytes: 0 },
      packages: [],
      versions: [],
      build: null,
      profile: { provider: 'native' },
    });
    expect(env.id).toMatch(/^henv_[0-9a-f]{32}$/);
    expect(env.createdAt).toBeGreaterThan(1_600_000_000_000); // milliseconds
    expect((await server.json(`/v1/environments/${env.id}`)).slug).toBe('content-studio');
    expect((await server.json('/v1/environments')).map((e: { id: string }) => e.id)).toContain(env.id);
  });

  it('should refuse a name without a path segment (environment_invalid) and a slug in use (environment_exists)', async () => {
    await expectError(send(server, 'POST', '/v1/environments', JSON.stringify({ name: '!!! ???' }), { 'content-type': 'application/json' }), 400, 'environment_invalid');
    await createNamed(server, 'Twin Slug');
    await expectError(send(server, 'POST', '/v1/environments', JSON.stringify({ name: 'twin  SLUG' }), { 'content-type': 'application/json' }), 409, 'environment_exists');
    // Another scope has its own places.
    expect((await createNamed(server, 'Twin Slug', tokens.bob)).slug).toBe('twin-slug');
  });

  it('should rename, describe and set the entry with PUT, the mount following the new slug', async () => {
    const env = await createNamed(server, 'Before Rename');
    const updated = await server.json(`/v1/environments/${env.id}`, { method: 'PUT', body: { name: 'After Rename', description: 'd', entry: 'python3 run.py' } });
    expect(updated).toMatchObject({ slug: 'after-rename', mount: '/env/after-rename', description: 'd', entry: 'python3 run.py' });
  });
});

describe('files (seed 001 §3)', () => {
  it('should write, list, read and remove files and directories, preserving bytes exactly', async () => {
    const env = await createNamed(server, 'Files Tour');
    const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await putFile(server, env.id, 'assets/brand/logo.bin', binary);
    // A JSON file written with a JSON content type is still just bytes.
    const json = '{"not": "parsed" }\n';
    expect((await answer(await send(server, 'PUT', `/v1/environments/${env.id}/files/config.json`, json, { 'content-type': 'application/json' }))).status).toBe(200);
    const made = await server.json(`/v1/environments/${env.id}/directories`, { body: { path: 'scripts/empty' } });
    expect(made).toEqual({ path: 'scripts/empty', created: true });

    const listing = await tree(env.id);
    expect(listing.files).toEqual({ count: 2, bytes: 256 + json.length });
    expect(listing.entries).toEqual([
      { path: 'assets', type: 'directory', size: 256 },
      { path: 'assets/brand', type: 'directory', size: 256 },
      { path: 'assets/brand/logo.bin', type: 'file', size: 256 },
      { path: 'config.json', type: 'file', size: json.length },
      { path: 'scripts', type: 'directory', size: 0 },
      { path: 'scripts/empty', type: 'directory', size: 0 },
    ]);
    const read = await send(server, 'GET', `/v1/environments/${env.id}/files/assets/brand/logo.bin`);
    expect(Buffer.from(await read.arrayBuffer()).equals(binary)).toBe(true);
    const readJson = await send(server, 'GET', `/v1/environments/${env.id}/files/config.json`);
    expect(readJson.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await readJson.text()).toBe(json);
    expect((await server.json(`/v1/environments/${env.id}`)).files).toEqual({ count: 2, bytes: 256 + json.length });

    expect((await send(server, 'DELETE', `/v1/environments/${env.id}/files/assets`)).status).toBe(204);
    expect(await paths(env.id)).toEqual(['config.json', 'scripts', 'scripts/empty']);
    await expectError(send(server, 'GET', `/v1/environments/${env.id}/files/assets/brand/logo.bin`), 404, 'not_found');
  });

  it('should percent-decode each path segment', async () => {
    const env = await createNamed(server, 'Percent Paths');
    await putFile(server, env.id, 'my%20dir/na%C3%AFve%2Bplus.txt', 'decoded');
    expect(await paths(env.id)).toEqual(['my dir', 'my dir/naïve+plus.txt']);
    expect(await (await send(server, 'GET', `/v1/environments/${env.id}/files/my%20dir/na%C3%AFve%2Bplus.txt`)).text()).toBe('decoded');
  });

  it('should refuse paths that escape the root or are not plain, with environment_invalid, writing nothing', async () => {
    const env = await createNamed(server, 'Escapes');
    for (const bad of ['..%2F..%2Fevil', '../../evil', 'a/..%2F..%2F..%2Fevil', '%2Fabs%2Fpath', 'nul%00byte', 'back%5Cslash', 'C:%2Fevil']) {
      const put = await rawRequest('PUT', `/v1/environments/${env.id}/files/${bad}`, 'x');
      // `../` segments a server normalises away never reach this route at all: a 404 is just as safe.
      expect([400, 404], `${bad}: ${JSON.stringify(put.body)}`).toContain(put.status);
      if (put.status === 400) expect(put.body.error.code).toBe('environment_invalid');
    }
    await expectError(send(server, 'PUT', `/v1/environments/${env.id}/files/..%2F..%2Fevil`, 'x'), 400, 'environment_invalid');
    await expectError(send(server, 'POST', `/v1/environments/${env.id}/directories`, JSON.stringify({ path: '../out' }), { 'content-type': 'application/json' }), 400, 'environment_invalid');
    await expectError(send(server, 'DELETE', `/v1/environments/${env.id}/files/..%2F${env.id}`), 400, 'environment_invalid');
    expect(await paths(env.id)).toEqual([]);
    expectConfined(env.id);
  });

  it('should refuse an oversized file with file_too_large and detail.max_bytes, never truncating it', async () => {
    const env = await createNamed(server, 'Too Large');
    await putFile(server, env.id, 'keep.bin', Buffer.alloc(MAX_FILE, 1)); // exactly the limit is fine
    const detail = await expectError(send(server, 'PUT', `/v1/environments/${env.id}/files/big.bin`, Buffer.alloc(MAX_FILE + 1, 2)), 413, 'file_too_large');
    expect(detail.max_bytes).toBe(MAX_FILE);
    // A body with no declared length is refused while it streams.
    const chunked = await fetch(`${server.url}/v1/environments/${env.id}/files/keep.bin`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${tokens.alice}` },
      body: Readable.from([Buffer.alloc(MAX_FILE), Buffer.alloc(10)]) as unknown as BodyInit,
      duplex: 'half',
    } as RequestInit);
    expect((await answer(chunked)).body.error).toMatchObject({ code: 'file_too_large', detail: { max_bytes: MAX_FILE } });
    expect(await paths(env.id)).toEqual(['keep.bin']);
    expect(Buffer.from(await (await send(server, 'GET', `/v1/environments/${env.id}/files/keep.bin`)).arrayBuffer()).equals(Buffer.alloc(MAX_FILE, 1))).toBe(true);
  });

  it('should answer environment_not_found for another scope or an unknown environment, at every files endpoint', async () => {
    const env = await createNamed(server, 'Private Files');
    await putFile(server, env.id, 'secret.txt', 'alice only');
    const unknown = `henv_${'0'.repeat(32)}`;
    for (const [id, token] of [[env.id, tokens.bob], [unknown, tokens.alice]] as const) {
      await expectError(send(server, 'GET', `/v1/environments/${id}/files`, undefined, {}, token), 404, 'environment_not_found');
      await expectError(send(server, 'GET', `/v1/environments/${id}/files/secret.txt`, undefined, {}, token), 404, 'environment_not_found');
      await expectError(send(server, 'PUT', `/v1/environments/${id}/files/x.txt`, 'x', {}, token), 404, 'environment_not_found');
      await expectError(send(server, 'DELETE', `/v1/environments/${id}/files/secret.txt`, undefined, {}, token), 404, 'environment_not_found');
      await expectError(send(server, 'POST', `/v1/environments/${id}/directories`, '{"path":"d"}', { 'content-type': 'application/json' }, token), 404, 'environment_not_found');
      await expectError(send(server, 'POST', `/v1/environments/${id}/import`, craftTar([{ name: 'a', content: Buffer.from('a') }]), {}, token), 404, 'environment_not_found');
    }
    expect(await paths(env.id)).toEqual(['secret.txt']);
  });
});

describe('import (seed 001 §3.1)', () => {
  it('should import a tar.gz made by the system tar, stripping the single wrapping directory and dropping node_modules', async () => {
    const env = await createNamed(server, 'Tar Import');
    const project = path.join(scratch, 'tar-project', 'content-studio-main');
    mkdirSync(path.join(project, 'scripts'), { recursive: true });
    mkdirSync(path.join(project, 'node_modules', 'left-pad'), { recursive: true });
    writeFileSync(path.join(project, 'scripts', 'run.py'), 'print("run")\n');
    writeFileSync(path.join(project, 'README.md'), '# studio\n');
    writeFileSync(path.join(project, 'node_modules', 'left-pad', 'index.js'), 'laptop');
    const archive = execFileSync('tar', ['-czf', '-', '-C', path.dirname(project), 'content-studio-main']);
    const result = await answer(await send(server, 'POST', `/v1/environments/${env.id}/import`, archive, { 'content-type': 'application/gzip' }));
    expect(result.status).toBe(200);
    expect(result.body).toMatchObject({ files: 2, strippedPrefix: 'content-studio-main' });
    expect(result.body.skippedReasons).toContainEqual(expect.objectContaining({ reason: 'dependency_dir' }));
    expect(await paths(env.id)).toEqual(['README.md', 'scripts', 'scripts/run.py']);
  });

  it('should land over what is there without replace, and clear the source first with replace', async () => {
    const env = await createNamed(server, 'Replace Import');
    await putFile(server, env.id, 'old.txt', 'old');
    const archive = craftTar([{ name: 'new.txt', content: Buffer.from('new') }, { name: 'other.txt', content: Buffer.from('o') }]);
    await send(server, 'POST', `/v1/environments/${env.id}/import`, archive, { 'content-type': 'application/x-tar' });
    expect(await paths(env.id)).toEqual(['new.txt', 'old.txt', 'other.txt']);
    await send(server, 'POST', `/v1/environments/${env.id}/import?replace=true`, craftTar([{ name: 'only.txt', content: Buffer.from('1') }]));
    expect(await paths(env.id)).toEqual(['only.txt']);
  });

  it('should import a zip of any content type but JSON', async () => {
    const env = await createNamed(server, 'Zip Import');
    const dir = path.join(scratch, 'zip-project');
    mkdirSync(path.join(dir, 'data'), { recursive: true });
    writeFileSync(path.join(dir, 'data', 'rows.csv'), 'a,b\n1,2\n');
    writeFileSync(path.join(dir, 'run.sh'), 'echo run\n');
    execFileSync('zip', ['-qr', path.join(scratch, 'p.zip'), 'data', 'run.sh'], { cwd: dir });
    const zip = execFileSync('cat', [path.join(scratch, 'p.zip')]);
    const result = await answer(await send(server, 'POST', `/v1/environments/${env.id}/import`, zip, { 'content-type': 'text/plain' }));
    expect(result).toMatchObject({ status: 200, body: { files: 2, skipped: 0 } });
    expect(await (await send(server, 'GET', `/v1/environments/${env.id}/files/data/rows.csv`)).text()).toBe('a,b\n1,2\n');
  });

  it('should import a git repository named in a JSON body, at its ref, without its .git', async () => {
    const env = await createNamed(server, 'Git Import');
    const repo = path.join(scratch, 'repo');
    mkdirSync(repo);
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.email=t@e', '-c', 'user.name=t', ...args], { cwd: repo });
    git('init', '-q', '-b', 'main');
    writeFileSync(path.join(repo, 'app.sh'), 'echo app\n');
    git('add', '.');
    git('commit', '-qm', 'one');
    git('checkout', '-qb', 'release');
    writeFileSync(path.join(repo, 'release.txt'), 'r\n');
    git('add', '.');
    git('commit', '-qm', 'two');
    const body = JSON.stringify({ git: { url: `file://${repo}`, ref: 'main' }, replace: true });
    const result = await answer(await send(server, 'POST', `/v1/environments/${env.id}/import`, body, { 'content-type': 'application/json' }));
    expect(result).toMatchObject({ status: 200, body: { files: 1 } });
    expect(await paths(env.id)).toEqual(['app.sh']);
    await expectError(
      send(server, 'POST', `/v1/environments/${env.id}/import`, JSON.stringify({ git: { url: 'ext::sh -c evil' } }), { 'content-type': 'application/json' }),
      400,
      'environment_invalid',
    );
  });

  it('should refuse an empty or unknown archive body with environment_invalid', async () => {
    const env = await createNamed(server, 'Not Archives');
    await expectError(send(server, 'POST', `/v1/environments/${env.id}/import`, 'just some text, not an archive at all'.repeat(20)), 400, 'environment_invalid');
    await expectError(send(server, 'POST', `/v1/environments/${env.id}/import`, Buffer.alloc(0), { 'content-type': 'application/x-tar' }), 400, 'environment_invalid');
  });
});

describe('archive attacks over HTTP: refused or dropped and counted, nothing written outside the root', () => {
  const benign: CraftedMember = { name: 'ok.txt', content: Buffer.from('fine') };
  const dropped = async (members: CraftedMember[]): Promise<{ env: string; reasons: Record<string, number> }> => {
    const env = (await createNamed(server, `attack ${Math.random().toString(36).slice(2, 9)}`)).id;
    const result = await answer(await send(server, 'POST', `/v1/environments/${env}/import`, craftTar([benign, ...members])));
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    return { env, reasons: Object.fromEntries(result.body.skippedReasons.map((r: { reason: string; count: number }) => [r.reason, r.count])) };
  };

  it.each<[string, CraftedMember[], Record<string, number>]>([
    ['../evil', [{ name: '../evil', content: Buffer.from('x') }], { parent_segment: 1 }],
    ['/abs/path', [{ name: '/abs/path', content: Buffer.from('x') }], { absolute_path: 1 }],
    ['..\\evil', [{ name: '..\\evil', content: Buffer.from('x') }], { backslash: 1 }],
    ['a symlink to /etc then a file written through it', [{ name: 'etc', type: '2', linkname: '/etc' }, { name: 'etc/berth-evil', content: Buffer.from('pwned') }], { symlink: 1, through_link: 1 }],
    ['a hardlink to outside', [{ name: 'passwd', type: '1', linkname: '/etc/passwd' }, { name: 'passwd', content: Buffer.from('root::0:0::/:/bin/sh\n') }], { hardlink: 1, through_link: 1 }],
    // The directory stays a real directory: what lands under it stays inside the root.
    ['a directory then a symlink of the same name', [{ name: 'd', type: '5' }, { name: 'd', type: '2', linkname: '/etc' }, { name: 'd/berth-evil', content: Buffer.from('in') }], { symlink: 1 }],
    ['a member with a NUL byte', [{ name: 'innocent', pax: { path: 'nul\0/../../evil' }, content: Buffer.from('x') }], { nul_byte: 1 }],
  ])('%s', async (_label, members, reasons) => {
    const { env, reasons: got } = await dropped(members);
    expect(got).toEqual(reasons);
    const listed = await paths(env);
    expect(listed).toContain('ok.txt');
    expect(listed.filter((p: string) => p.includes('evil') || p === 'etc' || p === 'passwd')).toEqual(got.symlink && listed.includes('d') ? ['d/berth-evil'] : []);
    expect(existsSync('/etc/berth-evil')).toBe(false);
    expectConfined(env);
  });

  it('should refuse a 1 GiB zero-filled bomb with environment_invalid and write none of it', async () => {
    const env = (await createNamed(server, 'Bomb')).id;
    const bomb = await gzip(function* () {
      yield tarHeader({ name: 'zeros.bin', type: '0', size: 1024 ** 3 });
      for (let i = 0; i < 1024; i++) yield Buffer.alloc(1024 ** 2);
    });
    expect(bomb.length).toBeLessThan(8 * 1024 ** 2);
    const detail = await expectError(send(server, 'POST', `/v1/environments/${env}/import`, bomb), 400, 'environment_invalid');
    expect(['too_large', 'compression_ratio']).toContain(detail.reason);
    expect(await paths(env)).toEqual([]);
    expectConfined(env);
  }, 60_000);

  it('should refuse 100,000 empty entries with environment_invalid and write none of them', async () => {
    const env = (await createNamed(server, 'Many Entries')).id;
    const archive = await gzip(function* () {
      for (let batch = 0; batch < 100; batch++) yield Buffer.concat(Array.from({ length: 1000 }, (_, i) => memberHead({ name: `e/${batch}-${i}`, size: 0 })));
      yield Buffer.alloc(1024);
    });
    const detail = await expectError(send(server, 'POST', `/v1/environments/${env}/import`, archive), 400, 'environment_invalid');
    expect(detail.reason).toBe('too_many_entries');
    expect(await paths(env)).toEqual([]);
    expectConfined(env);
  }, 180_000); // bounded by the server's pass over 50,000 entries: 28 s at load 15 here, past 60 s at load 20
});
