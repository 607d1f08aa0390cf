/**
 * The workspace file tools on real directories: versions and If-Match, create-only, the edit's exactly-once rule,
 * modes and owners of what is written, paging of listings, mkdir and remove with the changes they report.
 */
import { chmodSync, chownSync, closeSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync, writeSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import type { Readable } from 'node:stream';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../schemas/errors.ts';
import { fineCtime, learnCtimeGrain } from '../../src/providers/ctime-grain.ts';
import { INPUTS_DIR, WorkspaceFiles } from '../../src/runtime/workspaces/workspace-files.ts';

let root: string;
let files: WorkspaceFiles;
const sha = (s: string | Buffer) => `sha256:${createHash('sha256').update(s).digest('hex')}`;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'berth-wsfiles-'));
  files = new WorkspaceFiles(root);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

/** The error a call fails with (the test fails if it succeeds). */
async function failure(p: Promise<unknown>): Promise<{ code: string; detail: Record<string, unknown> }> {
  try {
    await p;
  } catch (e) {
    if (isBerthError(e)) return { code: e.code, detail: e.detail };
    throw e;
  }
  throw new Error('expected the call to fail');
}

describe('read', () => {
  it('returns the bytes, the size and the sha256 of the whole file, in full or as a range', async () => {
    const text = 'hello workspace\n'.repeat(100_000); // 1.6 MB: a range spans several hashed chunks
    writeFileSync(join(root, 'a.txt'), text);
    const whole = await files.read('a.txt');
    expect(whole.data.toString()).toBe(text);
    expect(whole).toMatchObject({ size: text.length, version: sha(text), offset: 0 });
    const range = await files.read('a.txt', { offset: 1_048_570, limit: 20 });
    expect(range.data.toString()).toBe(text.slice(1_048_570, 1_048_590));
    expect(range).toMatchObject({ size: text.length, version: sha(text), offset: 1_048_570 });
    expect((await files.read('a.txt', { offset: text.length + 5 })).data.length).toBe(0);
  });

  it('refuses a file over maxFileBytes with file_too_large and a bad range with invalid_request', async () => {
    writeFileSync(join(root, 'big'), Buffer.alloc(2048));
    const small = new WorkspaceFiles(root, { maxFileBytes: 1024 });
    expect(await failure(small.read('big'))).toEqual({ code: 'file_too_large', detail: { path: 'big', size: 2048, max_bytes: 1024 } });
    expect(await failure(small.write('new', Buffer.alloc(1025)))).toMatchObject({ code: 'file_too_large', detail: { max_bytes: 1024 } });
    expect(await failure(files.read('big', { offset: -1 }))).toMatchObject({ code: 'invalid_request', detail: { reason: 'bad_range' } });
  });

  it('answers not_found for a missing file or a missing directory on the way', async () => {
    expect(await failure(files.read('nope'))).toEqual({ code: 'not_found', detail: { path: 'nope' } });
    expect(await failure(files.read('no/such/file'))).toEqual({ code: 'not_found', detail: { path: 'no/such/file' } });
  });
});

describe('remembered versions', () => {
  it('a settled file rewritten with the same size and mtime gets its new version (ctime decides)', { timeout: 10_000 }, async () => {
    const file = join(root, 'settled');
    writeFileSync(file, 'before');
    // Versions are remembered only for files unchanged for 2 s: wait until this one is.
    while (Date.now() < statSync(file).ctimeMs + 2100) await new Promise((r) => setTimeout(r, 100));
    expect((await files.read('settled')).version).toBe(sha('before'));
    expect((await files.stat('settled')).version).toBe(sha('before'));
    execFileSync('touch', ['-r', file, `${file}.times`]);
    writeFileSync(file, 'AFTER!');
    execFileSync('touch', ['-r', `${file}.times`, file]); // what a command can do: put the mtime back, to the nanosecond
    expect(statSync(file, { bigint: true }).mtimeNs).toBe(statSync(`${file}.times`, { bigint: true }).mtimeNs);
    expect((await files.read('settled')).version).toBe(sha('AFTER!'));
    expect((await files.read('settled', { offset: 1, limit: 2 })).version).toBe(sha('AFTER!'));
    expect((await files.stat('settled')).version).toBe(sha('AFTER!'));
    expect(await failure(files.write('settled', Buffer.from('x'), { ifMatch: sha('before') }))).toMatchObject({ code: 'stale_version' });
  });
});

/** Writes through the tools, then waits until the version is remembered (at once where ctimes are fine). */
async function writeRemembered(path: string, data: Buffer): Promise<void> {
  await files.write(path, data);
  if (fineCtime(statSync(root, { bigint: true }).dev)) return;
  // Coarse ctimes: remembered only once settled, by a read after that.
  await new Promise((r) => setTimeout(r, 2_100));
  await files.read(path);
}

describe('versions remembered at once where ctimes are fine', () => {
  it('a file the tools wrote is streamed from its remembered version where ctimes are fine, hashed where they are not', async () => {
    learnCtimeGrain(root);
    expect(readdirSync(root)).toEqual([]); // the probe leaves nothing behind
    const data = Buffer.alloc(300 * 1024, 7);
    const { version } = await files.write('big', data);
    const read = await files.readStream('big');
    expect(read.version).toBe(sha(data));
    expect(version).toBe(sha(data));
    // Buffer: read whole and hashed; a stream: sent from the descriptor with the version remembered by the write.
    expect(Buffer.isBuffer(read.body)).toBe(!fineCtime(statSync(root, { bigint: true }).dev));
    if (!Buffer.isBuffer(read.body)) for await (const _ of read.body);
    await read.done;
  });

  it('a streamed read fails, its last chunk held back, when the file changes while it is sent; unchanged, it ends whole', async () => {
    learnCtimeGrain(root);
    const data = Buffer.alloc(3 * 1024 * 1024 + 5, 1);
    await writeRemembered('big', data);
    const whole = await files.readStream('big');
    const got: Buffer[] = [];
    for await (const chunk of whole.body as AsyncIterable<Buffer>) got.push(chunk);
    expect(Buffer.concat(got).equals(data)).toBe(true);

    const changed = await files.readStream('big');
    expect(Buffer.isBuffer(changed.body)).toBe(false);
    const received: Buffer[] = [];
    const reading = (async () => {
      for await (const chunk of changed.body as AsyncIterable<Buffer>) {
        received.push(chunk);
        if (received.length === 1) {
          const fd = openSync(join(root, 'big'), 'r+');
          writeSync(fd, Buffer.from([2]), 0, 1, data.length - 1); // same size, one byte at the end
          closeSync(fd);
        }
      }
    })();
    await expect(reading).rejects.toMatchObject({ code: 'stale_version' });
    expect(Buffer.concat(received).length).toBeLessThan(data.length);
    await expect(changed.done).rejects.toMatchObject({ code: 'stale_version' });
  });

  it('a streamed read closes its descriptor once, whether it ends, fails or is dropped after its first chunk', async () => {
    learnCtimeGrain(root);
    const data = Buffer.alloc(2 * 1024 * 1024 + 1, 3);
    await writeRemembered('big', data);
    const open = () => readdirSync('/proc/self/fd').length;
    const before = open();
    for (let i = 0; i < 20; i++) {
      const read = await files.readStream('big');
      const body = read.body as Readable;
      if (i % 2 === 0) {
        body.once('data', () => body.destroy());
        await read.done.catch(() => undefined);
      } else {
        let bytes = 0;
        for await (const chunk of body) bytes += (chunk as Buffer).length;
        expect(bytes).toBe(data.length);
      }
      await new Promise((r) => setImmediate(r));
    }
    await new Promise((r) => setTimeout(r, 50));
    expect(open()).toBeLessThanOrEqual(before); // ten dropped reads that leaked would leave ten more
  });

  it('a same-size change right after a tool write or read, its mtime put back, is seen by the next read', async () => {
    learnCtimeGrain(root);
    const file = join(root, 'f');
    for (let i = 0; i < 40; i++) {
      const before = Buffer.from(`before-${String(i).padStart(3, '0')}`);
      const after = Buffer.from(`AFTER!-${String(i).padStart(3, '0')}`);
      await files.write('f', before);
      if (i % 2 === 1) expect((await files.read('f')).version).toBe(sha(before)); // remembered by the read this time
      const { mtime, atime } = statSync(file);
      writeFileSync(file, after); // in place, same size: what a command can do between two tool calls
      utimesSync(file, atime, mtime);
      expect((await files.read('f')).version).toBe(sha(after));
      expect(await failure(files.write('f', before, { ifMatch: sha(before) }))).toMatchObject({ code: 'stale_version' });
    }
  });
});

describe('write', () => {
  it('creates a file 0644 owned like the root, replaces it atomically and reports before/after stamps', async () => {
    const first = await files.write('dir/f.txt', Buffer.from('one'), { parents: true });
    expect(first).toEqual({ version: sha('one'), size: 3, change: { path: 'dir/f.txt', kind: 'file', before: null, after: { size: 3, hash: sha('one') } } });
    expect(statSync(join(root, 'dir/f.txt')).mode & 0o777).toBe(0o644);
    const second = await files.write('dir/f.txt', Buffer.from('two!'), { ifMatch: first.version });
    expect(second.change).toEqual({ path: 'dir/f.txt', kind: 'file', before: { size: 3, hash: sha('one') }, after: { size: 4, hash: sha('two!') } });
    expect(readFileSync(join(root, 'dir/f.txt'), 'utf8')).toBe('two!');
    expect(readdirSync(join(root, 'dir'))).toEqual(['f.txt']); // no temp file left behind
  });

  it('without parents, a missing directory is not_found', async () => {
    expect(await failure(files.write('missing/f', Buffer.from('x')))).toMatchObject({ code: 'not_found', detail: { path: 'missing/f' } });
  });

  it('a stale If-Match is stale_version and leaves the file unchanged', async () => {
    const v1 = await files.write('f', Buffer.from('v1'));
    await files.write('f', Buffer.from('v2'));
    expect(await failure(files.write('f', Buffer.from('v3'), { ifMatch: v1.version }))).toEqual({
      code: 'stale_version',
      detail: { path: 'f', expected: v1.version, actual: sha('v2') },
    });
    expect(readFileSync(join(root, 'f'), 'utf8')).toBe('v2');
    expect(readdirSync(root)).toEqual(['f']);
  });

  it("If-Match 'absent' creates only: an existing file is stale_version, a malformed version invalid_request", async () => {
    await files.write('f', Buffer.from('x'), { ifMatch: 'absent' });
    expect(await failure(files.write('f', Buffer.from('y'), { ifMatch: 'absent' }))).toMatchObject({ code: 'stale_version', detail: { expected: 'absent', actual: sha('x') } });
    expect(await failure(files.write('g', Buffer.from('y'), { ifMatch: sha('x') }))).toMatchObject({ code: 'stale_version', detail: { actual: 'absent' } });
    expect(await failure(files.write('f', Buffer.from('y'), { ifMatch: 'W/"1"' }))).toMatchObject({ code: 'invalid_request', detail: { reason: 'bad_version' } });
    expect(readFileSync(join(root, 'f'), 'utf8')).toBe('x');
  });

  it("keeps the old file's permission bits, without set-id bits", async () => {
    writeFileSync(join(root, 'run.sh'), 'echo');
    chmodSync(join(root, 'run.sh'), 0o4750);
    await files.write('run.sh', Buffer.from('echo hi'));
    expect(statSync(join(root, 'run.sh')).mode & 0o7777).toBe(0o750);
  });

  it('gives what it creates to the configured owner (fchown/lchown), runs as root', async () => {
    expect(process.getuid?.()).toBe(0);
    const sandboxed = new WorkspaceFiles(root, { owner: { uid: 65534, gid: 65534 } });
    await sandboxed.write('a/b/f', Buffer.from('x'), { parents: true });
    await sandboxed.mkdir('c');
    await sandboxed.edit('a/b/f', 'x', 'y');
    for (const p of ['a', 'a/b', 'a/b/f', 'c']) expect(statSync(join(root, p))).toMatchObject({ uid: 65534, gid: 65534 });
  });

  it('with no owner configured, gives new files the root directory uid/gid', async () => {
    chownSync(root, 1234, 4321);
    await new WorkspaceFiles(root).write('f', Buffer.from('x'));
    expect(statSync(join(root, 'f'))).toMatchObject({ uid: 1234, gid: 4321 });
  });

  it('refuses to write over a directory', async () => {
    mkdirSync(join(root, 'd'));
    expect(await failure(files.write('d', Buffer.from('x')))).toMatchObject({ code: 'invalid_request', detail: { reason: 'is_directory' } });
  });
});

describe('edit', () => {
  it('replaces the one occurrence and reports the change', async () => {
    const v = await files.write('f', Buffer.from('alpha beta gamma'));
    const done = await files.edit('f', 'beta', 'BETA', { ifMatch: v.version });
    expect(done).toMatchObject({ replacements: 1, version: sha('alpha BETA gamma'), change: { before: { hash: v.version }, after: { hash: sha('alpha BETA gamma') } } });
    expect(readFileSync(join(root, 'f'), 'utf8')).toBe('alpha BETA gamma');
  });

  it('refuses a missing or repeated old text and writes nothing', async () => {
    await files.write('f', Buffer.from('a-b a-b a-b'));
    expect(await failure(files.edit('f', 'zzz', 'y'))).toMatchObject({ code: 'invalid_request', detail: { path: 'f', reason: 'old_text_missing' } });
    expect(await failure(files.edit('f', 'a-b', 'y'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'old_text_not_unique', count: 3 } });
    expect(await failure(files.edit('f', '', 'y'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'old_text_empty' } });
    expect(readFileSync(join(root, 'f'), 'utf8')).toBe('a-b a-b a-b');
  });

  it('a stale If-Match is stale_version', async () => {
    await files.write('f', Buffer.from('one'));
    expect(await failure(files.edit('f', 'one', 'two', { ifMatch: sha('zero') }))).toMatchObject({ code: 'stale_version' });
    expect(readFileSync(join(root, 'f'), 'utf8')).toBe('one');
  });
});

describe('list and stat', () => {
  it('lists sorted by name, in pages joined by the cursor', async () => {
    const names = Array.from({ length: 25 }, (_, i) => `f${String(i).padStart(2, '0')}`).reverse();
    for (const n of names) writeFileSync(join(root, n), n);
    mkdirSync(join(root, 'sub'));
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await files.list('', { limit: 10, cursor });
      expect(page.entries.length).toBeLessThanOrEqual(10);
      seen.push(...page.entries.map((e) => e.name));
      cursor = page.next;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...names].sort().concat('sub'));
    const all = await files.list('');
    expect(all.next).toBeUndefined();
    expect(all.entries.at(-1)).toMatchObject({ name: 'sub', path: 'sub', type: 'directory' });
    expect(all.entries[0]).toMatchObject({ name: 'f00', path: 'f00', type: 'file', size: 3, mode: 0o644 });
    expect(await failure(files.list('', { limit: 1001 }))).toMatchObject({ code: 'invalid_request', detail: { reason: 'bad_limit' } });
    expect(await failure(files.list('', { cursor: '!!' }))).toMatchObject({ code: 'invalid_request', detail: { reason: 'bad_cursor' } });
  });

  it('stat gives a file its version, a directory none; listing a file is not_a_directory', async () => {
    await files.write('d/f', Buffer.from('abc'), { parents: true });
    expect(await files.stat('d/f')).toMatchObject({ name: 'f', path: 'd/f', type: 'file', size: 3, version: sha('abc') });
    const dir = await files.stat('d');
    expect(dir).toMatchObject({ type: 'directory' });
    expect(dir.version).toBeUndefined();
    expect(await files.stat('')).toMatchObject({ path: '', type: 'directory' });
    expect(await failure(files.list('d/f'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'not_a_directory' } });
  });
});

describe('mkdir and remove', () => {
  it('mkdir reports each directory made; an existing path is refused without parents', async () => {
    expect((await files.mkdir('a/b/c', { parents: true })).changes.map((c) => c.path)).toEqual(['a', 'a/b', 'a/b/c']);
    expect((await files.mkdir('a/b', { parents: true })).changes).toEqual([]);
    expect(await failure(files.mkdir('a/b'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'exists' } });
    expect(await failure(files.mkdir('x/y'))).toMatchObject({ code: 'not_found' });
  });

  it('removes a file, an empty directory, and a tree only when recursive, with every removed stamp', async () => {
    await files.write('t/a', Buffer.from('A'), { parents: true });
    await files.write('t/u/b', Buffer.from('BB'), { parents: true });
    await files.mkdir('e');
    expect((await files.remove('e')).changes).toEqual([{ path: 'e', kind: 'directory', before: { size: 0, hash: '' }, after: null }]);
    expect(await failure(files.remove('t'))).toMatchObject({ code: 'invalid_request', detail: { reason: 'not_empty' } });
    const { changes } = await files.remove('t', { recursive: true });
    expect(changes).toEqual([
      { path: 't', kind: 'directory', before: { size: 0, hash: '' }, after: null },
      { path: 't/a', kind: 'file', before: { size: 1, hash: sha('A') }, after: null },
      { path: 't/u', kind: 'directory', before: { size: 0, hash: '' }, after: null },
      { path: 't/u/b', kind: 'file', before: { size: 2, hash: sha('BB') }, after: null },
    ]);
    expect(readdirSync(root)).toEqual([]);
    expect(await failure(files.remove('t'))).toMatchObject({ code: 'not_found' });
  });
});

describe('stage', () => {
  it('writes under the inputs directory, owned by the server, where the tools can read but not write', async () => {
    const tools = new WorkspaceFiles(root, { owner: { uid: 65534, gid: 65534 } });
    const staged = await tools.stage('in/data.csv', Buffer.from('1,2'));
    expect(staged.change).toMatchObject({ path: `${INPUTS_DIR}/in/data.csv`, before: null });
    expect(statSync(join(root, INPUTS_DIR, 'in/data.csv'))).toMatchObject({ uid: process.getuid!() });
    expect((await tools.read(`${INPUTS_DIR}/in/data.csv`)).data.toString()).toBe('1,2');
    expect(await failure(tools.write(`${INPUTS_DIR}/in/data.csv`, Buffer.from('x')))).toMatchObject({ code: 'invalid_request', detail: { reason: 'read_only_path' } });
  });
});
