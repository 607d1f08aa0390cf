import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthError } from '../../../schemas/errors.ts';
import { contentLayout } from '../../../src/content/content-layout.ts';
import { SourceTree } from '../../../src/content/source-tree.ts';

let base: string;
let tree: SourceTree;
const MiB = 1024 * 1024;

beforeEach(() => {
  base = mkdtempSync(path.join(tmpdir(), 'berth-source-'));
  tree = new SourceTree(contentLayout(path.join(base, 'env')), { maxFileBytes: MiB });
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

/** `bytes` in uneven chunks, counting how many chunks were pulled. */
function chunked(bytes: Buffer, sizes = [1, 7, 4096, 65536, 3]) {
  const stats = { pulled: 0 };
  const body = (async function* () {
    for (let at = 0, i = 0; at < bytes.length; i++) {
      const size = sizes[i % sizes.length];
      stats.pulled++;
      yield bytes.subarray(at, at + size);
      at += size;
    }
  })();
  return { body, stats };
}

async function readAll(rel: string): Promise<Buffer> {
  const { stream } = await tree.read(rel);
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function caught(promise: Promise<unknown>): Promise<BerthError> {
  try {
    await promise;
  } catch (e) {
    if (e instanceof BerthError) return e;
    throw e;
  }
  throw new Error('expected a BerthError');
}

describe('source tree', () => {
  it('should keep bytes exactly as sent, binary included, and give a content type from the extension', async () => {
    const everyByte = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const random = randomBytes(MiB - 5);
    await tree.write('assets/bytes.bin', chunked(everyByte).body);
    await tree.write('assets/deep/er/random.png', chunked(random).body);
    await tree.write('notes.md', chunked(Buffer.from('# é\r\n\0tail')).body);
    expect((await readAll('assets/bytes.bin')).equals(everyByte)).toBe(true);
    expect((await readAll('assets/deep/er/random.png')).equals(random)).toBe(true);
    expect(readFileSync(path.join(tree.dir, 'notes.md')).equals(Buffer.from('# é\r\n\0tail'))).toBe(true);
    const read = await tree.read('assets/deep/er/random.png');
    read.stream.destroy();
    expect(read).toMatchObject({ size: MiB - 5, contentType: 'image/png' });
    expect((await tree.read('notes.md')).contentType).toBe('text/markdown; charset=utf-8');
    expect((await tree.read('assets/bytes.bin')).contentType).toBe('application/octet-stream');
  });

  it('should list every file and directory with sizes and a files summary', async () => {
    await tree.write('a/b/one.txt', [Buffer.from('12345')]);
    await tree.write('a/two.txt', [Buffer.from('123')]);
    await tree.mkdir('empty/dir');
    expect(await tree.tree()).toEqual({
      entries: [
        { path: 'a', type: 'directory', size: 8 },
        { path: 'a/b', type: 'directory', size: 5 },
        { path: 'a/b/one.txt', type: 'file', size: 5 },
        { path: 'a/two.txt', type: 'file', size: 3 },
        { path: 'empty', type: 'directory', size: 0 },
        { path: 'empty/dir', type: 'directory', size: 0 },
      ],
      files: { count: 2, bytes: 8 },
    });
  });

  it('should list an environment with no source yet as empty', async () => {
    expect(await tree.tree()).toEqual({ entries: [], files: { count: 0, bytes: 0 } });
  });

  it('should replace a file whole and keep its mode', async () => {
    await tree.write('run.sh', [Buffer.from('old old old')]);
    chmodSync(path.join(tree.dir, 'run.sh'), 0o755);
    await tree.write('run.sh', [Buffer.from('new')]);
    expect(readFileSync(path.join(tree.dir, 'run.sh'), 'utf8')).toBe('new');
    expect(statSync(path.join(tree.dir, 'run.sh')).mode & 0o777).toBe(0o755);
  });

  it('should refuse a file over the limit while it streams, with max_bytes, leaving nothing and the old file intact', async () => {
    await tree.write('big.bin', [Buffer.from('previous')]);
    const { body, stats } = chunked(randomBytes(4 * MiB), [64 * 1024]);
    const error = await caught(tree.write('big.bin', body));
    expect(error.code).toBe('file_too_large');
    expect(error.detail.max_bytes).toBe(MiB);
    expect(error.status).toBe(413);
    expect(stats.pulled).toBeLessThanOrEqual(MiB / (64 * 1024) + 1); // stopped reading at the limit
    expect(readFileSync(path.join(tree.dir, 'big.bin'), 'utf8')).toBe('previous');
    expect(readdirSync(tree.layout.staging)).toEqual([]);

    const fresh = await caught(tree.write('new/big.bin', chunked(randomBytes(MiB + 1), [MiB + 1]).body));
    expect(fresh.code).toBe('file_too_large');
    expect(existsSync(path.join(tree.dir, 'new'))).toBe(false);
  });

  it('should accept a file of exactly the limit', async () => {
    expect((await tree.write('edge.bin', [Buffer.alloc(MiB, 1)])).size).toBe(MiB);
  });

  it('should refuse a declared oversize body before reading any of it', async () => {
    const { body, stats } = chunked(Buffer.alloc(10));
    expect((await caught(tree.write('x', body, { declaredBytes: MiB + 1 }))).code).toBe('file_too_large');
    expect(stats.pulled).toBe(0);
  });

  it('should refuse paths that escape, name a directory, or go through a link', async () => {
    await tree.mkdir('dir');
    symlinkSync('/tmp', path.join(tree.dir, 'out'));
    writeFileSync(path.join(base, 'outside.txt'), 'keep');
    symlinkSync(path.join(base, 'outside.txt'), path.join(tree.dir, 'leaf'));
    for (const [rel, reason] of [
      ['../outside.txt', 'parent_segment'],
      ['/etc/hosts', 'absolute_path'],
      ['dir', 'is_directory'],
      ['out/evil', 'symlink'],
      ['leaf', 'symlink'],
    ]) {
      const error = await caught(tree.write(rel, [Buffer.from('evil')]));
      expect(error.code, rel).toBe('environment_invalid');
      expect(error.detail.reason, rel).toBe(reason);
    }
    expect(readFileSync(path.join(base, 'outside.txt'), 'utf8')).toBe('keep');
    expect(existsSync('/tmp/evil')).toBe(false);
    expect((await caught(tree.read('leaf'))).detail.reason).toBe('symlink');
    expect((await caught(tree.remove('out'))).detail.reason).toBe('symlink');
    expect(existsSync('/tmp')).toBe(true);
  });

  it('should make directories, and remove a file or a whole tree', async () => {
    expect(await tree.mkdir('assets/brand')).toEqual({ path: 'assets/brand', created: true });
    expect(await tree.mkdir('assets/brand/')).toEqual({ path: 'assets/brand', created: false });
    await tree.write('assets/brand/logo.svg', [Buffer.from('<svg/>')]);
    await tree.write('keep.txt', [Buffer.from('k')]);
    expect((await caught(tree.mkdir('keep.txt'))).detail.reason).toBe('is_file');

    expect(await tree.remove('assets/brand/logo.svg')).toEqual({ path: 'assets/brand/logo.svg', type: 'file' });
    await tree.write('assets/brand/logo.svg', [Buffer.from('<svg/>')]);
    expect(await tree.remove('assets')).toEqual({ path: 'assets', type: 'directory' });
    expect((await tree.tree()).entries.map((e) => e.path)).toEqual(['keep.txt']);
    expect((await caught(tree.remove('assets'))).code).toBe('not_found');
    expect((await caught(tree.remove(''))).detail.reason).toBe('empty_path');
    expect(readdirSync(tree.layout.staging)).toEqual([]);
  });

  it('should answer not_found for a missing file and refuse reading a directory', async () => {
    await tree.mkdir('d');
    expect((await caught(tree.read('missing.txt'))).code).toBe('not_found');
    expect((await caught(tree.read('d'))).detail.reason).toBe('is_directory');
  });
});
