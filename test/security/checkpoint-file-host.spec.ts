/**
 * The view belongs to the attacker (a command of another uid writes it while Berth captures or applies): links to
 * /etc/passwd or the data directory are recorded as links, never read; a link planted where an apply writes a file,
 * a parent directory or removes something never lets the write or removal leave the view; FIFOs neither block nor
 * get captured; a directory swapped for a link during a capture never yields outside bytes; malicious manifests are
 * refused with nothing written; the capture limits hold.
 *
 * Not tested: a hard link to a file outside the view. A staging volume is its own mount, and link(2) across mounts
 * fails (EXDEV) even on one filesystem; inside a directory workspace, protected_hardlinks lets the command's uid
 * link only files it may already read and write, whose bytes it can copy into the view anyway.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TreeEntry, TreeManifest } from '../../src/providers/file-host.ts';
import { DirectoryFileHost } from '../../src/providers/directory-file-host.ts';
import { CheckpointPacks } from '../../src/runtime/workspaces/checkpoint-packs.ts';
import { captureInto, describeTree, tempDir, viewMaker } from '../fixtures/file-host-fixture.ts';
import { startSwapper } from '../fixtures/link-swapper.ts';

const SECRET = 'SECRET-OUTSIDE-THE-VIEW';
const OWNER = { uid: 1000, gid: 1000 };

let base: string;
let outside: string;
let packs: CheckpointPacks;
const freshDir = viewMaker(() => base);

beforeAll(() => {
  base = tempDir('file-host-attack');
  outside = join(base, 'outside');
  mkdirSync(outside);
  writeFileSync(join(outside, 'secret'), SECRET);
  writeFileSync(join(outside, 'victim'), 'untouched');
  packs = new CheckpointPacks(join(base, 'checkpoints'));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** A tree of the view as it is now, to apply elsewhere: one file `name` with `content` (in a directory when nested). */
async function manifestOf(build: (dir: string) => void): Promise<TreeManifest> {
  const dir = freshDir();
  build(dir);
  return (await captureInto(packs, dir)).manifest;
}

describe('capture of a hostile view', () => {
  it('records links to /etc/passwd and to the data directory as links, never their content', async () => {
    const view = freshDir();
    symlinkSync('/etc/passwd', join(view, 'passwd'));
    symlinkSync(join(base, 'checkpoints'), join(view, 'data'));
    symlinkSync(join(outside, 'secret'), join(view, 'secret'));
    const { manifest, received } = await captureInto(packs, view);
    expect(manifest.entries.map((e) => [e.path, e.type])).toEqual([
      ['data', 'symlink'],
      ['passwd', 'symlink'],
      ['secret', 'symlink'],
    ]);
    expect(received.length).toBe(0);
    expect(manifest.bytes).toBe(0);
  });

  it('neither blocks on nor records a FIFO (or a socket), counting them as skipped', async () => {
    const view = freshDir();
    mkdirSync(join(view, 'sub'));
    execFileSync('mkfifo', [join(view, 'pipe'), join(view, 'sub/pipe')]);
    writeFileSync(join(view, 'sub/file'), 'ok');
    const { manifest } = await captureInto(packs, view);
    expect(manifest.entries.map((e) => e.path)).toEqual(['sub', 'sub/file']);
    expect(manifest.skipped).toBe(2);
  });

  it('never yields outside bytes while directories are swapped for links to outside during the capture', async () => {
    const view = freshDir();
    const DIRS = 50;
    for (let i = 0; i < DIRS; i++) {
      mkdirSync(join(view, `d${i}`));
      // The names the outside directory has: a walk that looked a child up by path through the swapped link finds them.
      writeFileSync(join(view, `d${i}/secret`), 'inside');
      writeFileSync(join(view, `d${i}/victim`), 'inside too');
    }
    const outsideHashes = ['secret', 'victim'].map((name) => `sha256:${createHash('sha256').update(readFileSync(join(outside, name))).digest('hex')}`);
    const swapper = await startSwapper(
      view,
      `for (let i = 0; i < ${DIRS}; i++) {
         quietly(() => fs.renameSync(p('d' + i), p('h' + i))); quietly(() => fs.symlinkSync(${JSON.stringify(outside)}, p('d' + i)));
         quietly(() => fs.unlinkSync(p('d' + i))); quietly(() => fs.renameSync(p('h' + i), p('d' + i)));
       }`,
    );
    let linksSeen = 0;
    // 300 captures at least, and on until one met a swapped link (on a busy host the swapper may be scheduled rarely).
    const deadline = performance.now() + 30_000;
    try {
      for (let i = 0; i < 300 || (linksSeen === 0 && performance.now() < deadline); i++) {
        const { manifest, received } = await captureInto(packs, view);
        expect(received.includes(SECRET)).toBe(false);
        expect(manifest.entries.filter((e) => outsideHashes.includes(e.hash!))).toEqual([]);
        linksSeen += manifest.entries.filter((e) => e.type === 'symlink').length;
      }
    } finally {
      swapper.kill('SIGKILL');
    }
    expect(linksSeen).toBeGreaterThan(0); // the race was run
  });

  it('refuses a view over the entry or byte limit with quota_exceeded', async () => {
    const view = freshDir();
    for (let i = 0; i < 5; i++) writeFileSync(join(view, `f${i}`), Buffer.alloc(1000));
    await expect(captureInto(packs, view, undefined, { maxEntries: 4, maxBytes: 1 << 20 })).rejects.toMatchObject({
      code: 'quota_exceeded',
      detail: { quota: 'checkpoint_entries', limit: 4, use: 5 },
    });
    await expect(captureInto(packs, view, undefined, { maxEntries: 100, maxBytes: 2500 })).rejects.toMatchObject({
      code: 'quota_exceeded',
      detail: { quota: 'checkpoint_bytes', limit: 2500 },
    });
  });
});

describe('apply into a hostile view', () => {
  it('replaces a link planted where a file is written; the link\'s target is untouched', async () => {
    const target = await manifestOf((dir) => writeFileSync(join(dir, 'a.txt'), 'from the checkpoint'));
    const view = freshDir();
    symlinkSync(join(outside, 'victim'), join(view, 'a.txt'));
    await new DirectoryFileHost(view, OWNER).apply(target, undefined, packs.source());
    expect(readFileSync(join(outside, 'victim'), 'utf8')).toBe('untouched');
    expect(lstatSync(join(view, 'a.txt')).isFile()).toBe(true);
    expect(readFileSync(join(view, 'a.txt'), 'utf8')).toBe('from the checkpoint');
  });

  it('replaces a link planted where a parent directory is, with base or without; nothing lands outside', async () => {
    const target = await manifestOf((dir) => {
      mkdirSync(join(dir, 'sub/deeper'), { recursive: true });
      writeFileSync(join(dir, 'sub/deeper/new'), 'new');
      writeFileSync(join(dir, 'sub/also'), 'also');
    });
    const baseTree = await manifestOf((dir) => mkdirSync(join(dir, 'sub')));
    for (const from of [undefined, baseTree]) {
      const view = freshDir();
      symlinkSync(outside, join(view, 'sub'));
      await new DirectoryFileHost(view, OWNER).apply(target, from, packs.source());
      expect(readdirSync(outside).sort()).toEqual(['secret', 'victim']);
      expect(lstatSync(join(view, 'sub')).isDirectory()).toBe(true);
      expect(readFileSync(join(view, 'sub/deeper/new'), 'utf8')).toBe('new');
    }
  });

  it('removes nothing outside through a parent swapped for a link', async () => {
    const before = await manifestOf((dir) => {
      mkdirSync(join(dir, 'sub'));
      writeFileSync(join(dir, 'sub/victim'), 'x');
    });
    const after = await manifestOf((dir) => mkdirSync(join(dir, 'sub')));
    const view = freshDir();
    symlinkSync(outside, join(view, 'sub'));
    await new DirectoryFileHost(view).apply(after, before, packs.source());
    expect(readFileSync(join(outside, 'victim'), 'utf8')).toBe('untouched');
    // A removed directory swapped for a link: the link goes, not what it points at.
    const gone = await manifestOf(() => {});
    await new DirectoryFileHost(view).apply(gone, after, packs.source());
    expect(existsSync(join(view, 'sub'))).toBe(false);
    expect(readdirSync(outside).sort()).toEqual(['secret', 'victim']);
  });

  it('refuses malicious manifests whole, writing nothing', async () => {
    const good = await manifestOf((dir) => writeFileSync(join(dir, 'x'), 'payload'));
    const file = good.entries[0]!;
    const bad: [string, TreeEntry[]][] = [
      ['parent segment', [{ ...file, path: '../x' }]],
      ['absolute', [{ ...file, path: '/etc/x' }]],
      ['climbing', [{ path: 'a', type: 'directory', mode: 0o755, size: 0 }, { ...file, path: 'a/../../x' }]],
      ['NUL', [{ ...file, path: 'x\0y' }]],
      ['private directory', [{ path: '.berth', type: 'directory', mode: 0o755, size: 0 }, { ...file, path: '.berth/x' }]],
      ['private name', [{ ...file, path: '.berth-inputs' }]],
      ['pack path', [{ ...file, blob: { pack: '../../../etc', offset: 0 } }]],
      ['no parent', [{ ...file, path: 'nodir/x' }]],
      ['unsorted', [{ ...file, path: 'z' }, { ...file, path: 'a' }]],
      ['setuid mode', [{ ...file, mode: 0o4755 }]],
      ['link target NUL', [{ path: 'l', type: 'symlink', mode: 0o777, size: 0, target: 'a\0b' }]],
    ];
    // Each bad entry comes after a good one: nothing of a refused manifest is written, not even what precedes it.
    for (const [label, entries] of bad) {
      const view = freshDir();
      const manifest: TreeManifest = { ...good, entries: [{ ...file, path: '0-first' }, ...entries] };
      await expect(new DirectoryFileHost(view).apply(manifest, undefined, packs.source()), label).rejects.toMatchObject({ code: 'invalid_request' });
      expect(readdirSync(view), label).toEqual([]);
      await expect(new DirectoryFileHost(view).apply(good, manifest, packs.source()), `${label} as base`).rejects.toMatchObject({ code: 'invalid_request' });
      expect(readdirSync(view), label).toEqual([]);
    }
    expect(existsSync('/etc/x')).toBe(false);
    expect(describeTree(outside)).toEqual({ secret: expect.any(String), victim: expect.any(String) });
  });

  it('never writes, removes or lists the private names at the root of the view', async () => {
    const view = freshDir();
    mkdirSync(join(view, '.berth'));
    writeFileSync(join(view, '.berth/state'), 'berth');
    const target = await manifestOf((dir) => writeFileSync(join(dir, 'x'), 'y'));
    await new DirectoryFileHost(view).apply(target, undefined, packs.source());
    await new DirectoryFileHost(view).apply(await manifestOf(() => {}), target, packs.source());
    expect(readdirSync(view)).toEqual(['.berth']);
    expect(readFileSync(join(view, '.berth/state'), 'utf8')).toBe('berth');
  });
});
