/**
 * The workspace manifest on real directories: what it records (regular files with their sha256, directories), what
 * it never follows or reads (links, FIFOs, several-link files, the private directory), its limits, and the diff of two.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, linkSync, mkdirSync, mkdtempSync, openSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { nowNs, stampOfOpenFile, versionOf } from '../../src/runtime/workspaces/file-stamp.ts';
import { diffManifests, manifestOf, PRIVATE_DIR } from '../../src/runtime/workspaces/workspace-manifest.ts';

let base: string;
let root: string;
let outside: string;
const stamp = (s: string) => ({ size: Buffer.byteLength(s), hash: `sha256:${createHash('sha256').update(s).digest('hex')}` });

beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'berth-manifest-'));
  root = join(base, 'root');
  outside = join(base, 'outside');
  mkdirSync(root);
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret'), 'host secret');
  mkdirSync(join(outside, 'tree'));
  writeFileSync(join(outside, 'tree', 'deep'), 'host file');
});
afterEach(() => rmSync(base, { recursive: true, force: true }));

describe('manifestOf', () => {
  it('records every regular file with its size and sha256 and every directory, and nothing else', { timeout: 5000 }, async () => {
    mkdirSync(join(root, 'src/lib'), { recursive: true });
    writeFileSync(join(root, 'a.txt'), 'A');
    writeFileSync(join(root, 'src/lib/b.ts'), 'export {}');
    mkdirSync(join(root, PRIVATE_DIR));
    writeFileSync(join(root, PRIVATE_DIR, 'state'), 'private');
    symlinkSync(outside, join(root, 'to-outside'));
    symlinkSync('/', join(root, 'to-root'));
    symlinkSync(join(outside, 'secret'), join(root, 'src/secret-link'));
    linkSync(join(outside, 'secret'), join(root, 'hard'));
    execFileSync('mkfifo', [join(root, 'src/pipe')]);
    expect(await manifestOf(root)).toEqual({
      files: { 'a.txt': stamp('A'), 'src/lib/b.ts': stamp('export {}') },
      directories: ['src', 'src/lib'],
      truncated: false,
    });
  });

  it('says truncated past the file count, the bytes hashed, or the depth it walks', async () => {
    for (const n of ['a', 'b', 'c']) writeFileSync(join(root, n), 'xxxx');
    expect(await manifestOf(root, { maxFiles: 2 })).toMatchObject({ truncated: true, files: { a: stamp('xxxx'), b: stamp('xxxx') } });
    expect((await manifestOf(root, { maxBytes: 10 })).truncated).toBe(true);
    expect((await manifestOf(root, { maxFiles: 3, maxBytes: 12 })).truncated).toBe(false);
    mkdirSync(join(root, ...Array.from({ length: 70 }, () => 'd')), { recursive: true });
    expect((await manifestOf(root)).truncated).toBe(true);
  });
});

describe('manifestOf on a settled tree', () => {
  it('sees a change a command makes right after a walk remembered the file (same size, mtime put back), and no hard link made to it', async () => {
    writeFileSync(join(root, 'same-size'), 'A');
    writeFileSync(join(root, 'kept'), 'kept');
    await new Promise((resolve) => setTimeout(resolve, 2_100)); // settled: the walk remembers their stamps
    expect((await manifestOf(root)).files).toEqual({ kept: stamp('kept'), 'same-size': stamp('A') });
    execFileSync('sh', ['-c', 'touch -r same-size .ref && printf B > same-size && touch -r .ref same-size && rm .ref && ln kept kept-twice'], { cwd: root });
    // A file with two links (kept, kept-twice) is recorded under neither, though its stamp is remembered.
    expect((await manifestOf(root)).files).toEqual({ 'same-size': stamp('B') });
  });
});

describe('stampOfOpenFile', () => {
  it('hashes what the file holds when read, small or large, grown or shrunk since its fstat', async () => {
    const cases: [string, string | Buffer, string | Buffer][] = [
      ['grown', 'abc', 'abcdef'],
      ['shrunk', 'abcdef', 'ab'],
      ['large grown', Buffer.alloc(200_000, 1), Buffer.alloc(300_000, 2)],
    ];
    for (const [name, before, after] of cases) {
      const path = join(root, name);
      writeFileSync(path, before);
      const fd = openSync(path, 'r');
      try {
        const stats = fstatSync(fd, { bigint: true });
        writeFileSync(path, after);
        expect(await stampOfOpenFile(fd, stats, nowNs())).toEqual({ size: after.length, hash: versionOf(Buffer.from(after)) });
      } finally {
        closeSync(fd);
      }
    }
  });
});

describe('diffManifests', () => {
  it('reports files added, changed and removed and directories added and removed, sorted by path', async () => {
    mkdirSync(join(root, 'old'));
    writeFileSync(join(root, 'old/gone.txt'), 'bye');
    writeFileSync(join(root, 'same.txt'), 'same');
    writeFileSync(join(root, 'edit.txt'), 'v1');
    const before = await manifestOf(root);
    unlinkSync(join(root, 'old/gone.txt'));
    rmSync(join(root, 'old'), { recursive: true });
    writeFileSync(join(root, 'edit.txt'), 'v2');
    mkdirSync(join(root, 'new'));
    writeFileSync(join(root, 'new/made.txt'), 'hi');
    const after = await manifestOf(root);
    expect(diffManifests(before, after)).toEqual([
      { path: 'edit.txt', kind: 'file', before: stamp('v1'), after: stamp('v2') },
      { path: 'new', kind: 'directory', before: null, after: { size: 0, hash: '' } },
      { path: 'new/made.txt', kind: 'file', before: null, after: stamp('hi') },
      { path: 'old', kind: 'directory', before: { size: 0, hash: '' }, after: null },
      { path: 'old/gone.txt', kind: 'file', before: stamp('bye'), after: null },
    ]);
    expect(diffManifests(after, after)).toEqual([]);
  });

  it('a directory replaced by a link to a host tree shows as removed, its target never walked', async () => {
    mkdirSync(join(root, 'd'));
    writeFileSync(join(root, 'd/f'), 'mine');
    const before = await manifestOf(root);
    rmSync(join(root, 'd'), { recursive: true });
    symlinkSync(outside, join(root, 'd'));
    const changes = diffManifests(before, await manifestOf(root));
    expect(changes.map((c) => [c.path, c.after])).toEqual([
      ['d', null],
      ['d/f', null],
    ]);
  });
});
