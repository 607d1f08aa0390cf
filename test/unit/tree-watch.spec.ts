/**
 * Change tracking for captures (src/providers/tree-watch.ts) on real directories and the real inotify queue: after a
 * full capture, the next looks only at the paths changed since, and its tree is the tree a full walk finds, for every
 * kind of change a command makes (in place with the mtime put back, through a shared mapping, through a second link,
 * mode, new, removed, renamed, links); what it cannot vouch for (a directory changed, an overflowed queue, too many
 * changes) sends the next capture back to a full walk.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, closeSync, existsSync, linkSync, mkdirSync, openSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TreeManifest } from '../../src/providers/file-host.ts';
import { DirectoryFileHost } from '../../src/providers/directory-file-host.ts';
import { TreeCapture } from '../../src/providers/tree-capture.ts';
import { MAX_CHANGED_PATHS, treeWatches } from '../../src/providers/tree-watch.ts';
import { CheckpointPacks } from '../../src/runtime/workspaces/checkpoint-packs.ts';
import { captureInto, LIMITS, tempDir, viewMaker } from '../fixtures/file-host-fixture.ts';

let base: string;
let packs: CheckpointPacks;
const freshDir = viewMaker(() => base);

beforeAll(() => {
  base = tempDir('tree-watch');
  packs = new CheckpointPacks(join(base, 'checkpoints'));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** A view of `dirs` directories of `files` files each, captured once in full. */
async function watchedView(dirs = 3, files = 4): Promise<{ dir: string; manifest: TreeManifest }> {
  const dir = freshDir();
  for (let d = 0; d < dirs; d++) {
    mkdirSync(join(dir, `d${d}`));
    for (let f = 0; f < files; f++) writeFileSync(join(dir, `d${d}/f${f}`), `file ${d}/${f}\n`);
  }
  return { dir, manifest: (await captureInto(packs, dir)).manifest };
}

/** What a tree records of each entry, without capture hints and blob places (which differ between two captures). */
const recorded = (tree: TreeManifest) => ({
  files: tree.files,
  bytes: tree.bytes,
  skipped: tree.skipped,
  entries: tree.entries.map(({ path, type, mode, size, hash, target }) => ({ path, type, mode, size, hash, target })),
});

/** The tree a full walk of `dir` finds: nothing taken on trust, and apart from the view's watch (which it leaves be). */
async function walkedInFull(dir: string) {
  const writer = await packs.writer();
  const rootFd = openSync(dir, 'r');
  try {
    return recorded(await new TreeCapture(undefined, writer, LIMITS).run(rootFd));
  } finally {
    closeSync(rootFd);
    await writer.abort();
  }
}

describe('tree watch', () => {
  it('answers exactly the paths changed since the capture it vouches for, and nothing for a capture it did not make', async () => {
    const { dir, manifest } = await watchedView();
    writeFileSync(join(dir, 'd1/f2'), 'changed');
    writeFileSync(join(dir, 'new'), 'new');
    rmSync(join(dir, 'd0/f0'));
    const watch = treeWatches.of(dir)!;
    expect(watch.changedSince({ ...manifest })).toBeUndefined(); // another tree than the one it vouches for
    expect([...watch.changedSince(manifest)!.changed].sort()).toEqual(['d0/f0', 'd1/f2', 'new']);
  });

  it('vouches only for the capture of a view begun last, when two overlap, whichever ends last', async () => {
    const { dir } = await watchedView(20, 20);
    const writers = [await packs.writer(), await packs.writer()];
    const host = new DirectoryFileHost(dir);
    // The first capture is held at its first write until the second has ended, so it ends last.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const write = writers[0]!.write.bind(writers[0]);
    writers[0]!.write = async (bytes: Buffer) => {
      await gate;
      await write(bytes);
    };
    // A capture begins (and takes its epoch) before capture() returns: the second call is the one begun last.
    const firstCapture = host.capture(undefined, writers[0]!, LIMITS);
    const last = await host.capture(undefined, writers[1]!, LIMITS);
    release();
    const first = await firstCapture;
    await Promise.all(writers.map((writer) => writer.finish()));
    writeFileSync(join(dir, 'd3/f3'), 'changed');
    expect(treeWatches.of(dir)!.changedSince(first)).toBeUndefined();
    expect([...treeWatches.of(dir)!.changedSince(last)!.changed]).toEqual(['d3/f3']);
  });

  it('takes unchanged files from the previous capture without looking at them, and reads only the changed one', async () => {
    const { dir, manifest } = await watchedView();
    // A full walk would read every file whose hint is gone; the tracked capture keeps them as they were.
    for (const entry of manifest.entries) delete entry.stat;
    writeFileSync(join(dir, 'd2/f1'), 'the only change');
    const { manifest: next, received } = await captureInto(packs, dir, manifest);
    expect(received.toString()).toBe('the only change');
    expect(recorded(next)).toEqual(await walkedInFull(dir));
  });

  const changes: [string, (dir: string) => void][] = [
    [
      'a same-size rewrite with its mtime put back',
      (dir) => {
        const { atime, mtime } = statSync(join(dir, 'd0/f1'));
        writeFileSync(join(dir, 'd0/f1'), 'FILE 0/1\n');
        utimesSync(join(dir, 'd0/f1'), atime, mtime);
      },
    ],
    ['a mode', (dir) => chmodSync(join(dir, 'd1/f1'), 0o700)],
    ['a new file, a removed one and a rename across directories', (dir) => {
      writeFileSync(join(dir, 'd2/new'), 'new');
      rmSync(join(dir, 'd0/f3'));
      renameSync(join(dir, 'd1/f0'), join(dir, 'd2/moved'));
    }],
    ['a new link and a file swapped for a link', (dir) => {
      symlinkSync('../d0/f0', join(dir, 'd1/link'));
      rmSync(join(dir, 'd2/f2'));
      symlinkSync('/etc/passwd', join(dir, 'd2/f2'));
    }],
    ['a write through a second link to a file (its own directory hears nothing)', (dir) => {
      linkSync(join(dir, 'd0/f2'), join(dir, 'd1/second'));
      writeFileSync(join(dir, 'd1/second'), 'written through the second name');
    }],
    ['a write through a descriptor kept open, the file closed later', (dir) => {
      const fd = openSync(join(dir, 'd2/f3'), 'r+');
      writeSync(fd, 'X', 0);
      closeSync(fd);
    }],
    ['a new directory with files in it', (dir) => {
      mkdirSync(join(dir, 'd1/sub'));
      writeFileSync(join(dir, 'd1/sub/inner'), 'inner');
    }],
    ['a directory swapped for a link', (dir) => {
      renameSync(join(dir, 'd2'), join(dir, 'd2-moved'));
      symlinkSync('d2-moved', join(dir, 'd2'));
    }],
  ];
  for (const [what, change] of changes) {
    it(`captures ${what} as a full walk finds it, and again after one more change`, async () => {
      const { dir, manifest } = await watchedView();
      change(dir);
      const next = (await captureInto(packs, dir, manifest)).manifest;
      expect(recorded(next)).toEqual(await walkedInFull(dir));
      writeFileSync(join(dir, 'd0/f0'), 'one more');
      expect(recorded((await captureInto(packs, dir, next)).manifest)).toEqual(await walkedInFull(dir));
    });
  }

  const python = spawnSync('python3', ['--version']).status === 0;
  it.skipIf(!python)('captures a change made only through a shared mapping once the mapping is let go (python3 maps the file)', async () => {
    const { dir, manifest } = await watchedView();
    const file = join(dir, 'd1/f3');
    const mapped = spawnSync('python3', ['-c', `import mmap,sys\nf=open(sys.argv[1],'r+b')\nm=mmap.mmap(f.fileno(),0)\nm[0:4]=b'MAPD'\nm.close()\nf.close()`, file]);
    expect(mapped.status, mapped.stderr.toString()).toBe(0);
    const next = (await captureInto(packs, dir, manifest)).manifest;
    expect(recorded(next)).toEqual(await walkedInFull(dir));
    expect(next.entries.find((e) => e.path === 'd1/f3')!.hash).not.toBe(manifest.entries.find((e) => e.path === 'd1/f3')!.hash);
  });

  it.skipIf(process.getuid?.() !== 0)('does not vouch for a view that shows one directory at two paths (a bind mount; needs root)', async () => {
    const { dir } = await watchedView(2, 1);
    execFileSync('mount', ['--bind', join(dir, 'd0'), join(dir, 'd1')]);
    try {
      const both = (await captureInto(packs, dir)).manifest;
      writeFileSync(join(dir, 'd0/f0'), 'seen at both paths');
      expect(treeWatches.of(dir)!.changedSince(both)).toBeUndefined();
      const after = (await captureInto(packs, dir, both)).manifest;
      expect(after.entries.filter((e) => e.path.endsWith('/f0')).map((e) => e.size)).toEqual([18, 18]);
    } finally {
      execFileSync('umount', [join(dir, 'd1')]);
    }
  });

  // bindfs (FUSE) shows `source` at a mount: a write to `source` itself reaches the view with no event at the mount,
  // as a write from another client of an NFS or CIFS share does.
  const bindfs = process.getuid?.() === 0 && existsSync('/dev/fuse') && spawnSync('bindfs', ['--version']).status === 0;
  it.skipIf(!bindfs)('walks in full a view on a filesystem that may change unheard, or holding one (bindfs; needs root)', async () => {
    const source = (await watchedView(2, 2)).dir;
    const onFuse = freshDir();
    const holding = (await watchedView(2, 2)).dir;
    const mounts = [onFuse, join(holding, 'mnt')];
    mkdirSync(mounts[1]!);
    const mounted: string[] = [];
    try {
      for (const at of mounts) {
        execFileSync('bindfs', [source, at]);
        mounted.push(at);
      }
      for (const [view, written] of [[onFuse, 'd1/f0'], [holding, 'mnt/d1/f0']] as const) {
        const manifest = (await captureInto(packs, view)).manifest;
        writeFileSync(join(source, 'd1/f0'), `written beneath the mount, not through it, for ${view}`);
        expect(treeWatches.of(view)!.changedSince(manifest)).toBeUndefined();
        const next = (await captureInto(packs, view, manifest)).manifest;
        expect(recorded(next)).toEqual(await walkedInFull(view));
        const hash = (tree: TreeManifest) => tree.entries.find((e) => e.path === written)!.hash;
        expect(hash(next)).not.toBe(hash(manifest));
      }
    } finally {
      for (const at of mounted) execFileSync('umount', [at]);
    }
  });

  it('ignores Berth\'s private directory at the root, and still vouches', async () => {
    const { dir, manifest } = await watchedView();
    mkdirSync(join(dir, '.berth'));
    writeFileSync(join(dir, '.berth/state'), 'private');
    writeFileSync(join(dir, 'd0/f0'), 'changed');
    expect([...treeWatches.of(dir)!.changedSince(manifest)!.changed]).toEqual(['d0/f0']);
  });

  it('gives up on a directory created, on more changed paths than it keeps, and on an overflowed queue, and walks in full', async () => {
    const made = await watchedView();
    mkdirSync(join(made.dir, 'd0/sub'));
    expect(treeWatches.of(made.dir)!.changedSince(made.manifest)).toBeUndefined();

    const many = await watchedView(1, 1);
    for (let i = 0; i <= MAX_CHANGED_PATHS; i++) writeFileSync(join(many.dir, `d0/n${i}`), '');
    expect(treeWatches.of(many.dir)!.changedSince(many.manifest)).toBeUndefined();

    // Two files written in turn (the queue merges only an event equal to the last one): past the queue's bound.
    const flood = await watchedView(1, 2);
    const queued = Number((await import('node:fs')).readFileSync('/proc/sys/fs/inotify/max_queued_events', 'utf8'));
    const fds = [openSync(join(flood.dir, 'd0/f0'), 'r+'), openSync(join(flood.dir, 'd0/f1'), 'r+')];
    for (let i = 0; i <= queued; i++) writeSync(fds[i % 2]!, 'x', 0);
    fds.forEach((fd) => closeSync(fd));
    const after = (await captureInto(packs, flood.dir, flood.manifest)).manifest;
    expect(recorded(after)).toEqual(await walkedInFull(flood.dir));
    expect(after.entries.find((e) => e.path === 'd0/f0')!.size).toBe('file 0/0\n'.length);
    // The walk watched afresh: the next change is known again.
    writeFileSync(join(flood.dir, 'd0/f1'), 'after the flood');
    expect([...treeWatches.of(flood.dir)!.changedSince(after)!.changed]).toEqual(['d0/f1']);
  });
});
