/**
 * The watch behind incremental captures (src/providers/tree-watch.ts) against a hostile command in the view: it never
 * watches anything outside the view (a directory swapped for a link to a host directory), holds no more watches than
 * its bound however many directories the command makes, lets them go when the view is gone or floods it with changes
 * (the server's memory and the user's inotify watches stay bounded), and the capture stays the view's tree throughout.
 * Which directories are watched is read from the kernel's account (/proc/self/fdinfo of the inotify descriptor, which
 * shows only the first few); how many, from the watches' own.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CHANGED_PATHS, MAX_WATCHED_DIRS, treeWatches } from '../../src/providers/tree-watch.ts';
import { CheckpointPacks } from '../../src/runtime/workspaces/checkpoint-packs.ts';
import { captureInto, describeTree, tempDir, viewMaker } from '../fixtures/file-host-fixture.ts';

let base: string;
let packs: CheckpointPacks;
const freshDir = viewMaker(() => base);

beforeAll(() => {
  base = tempDir('tree-watch-hostile');
  packs = new CheckpointPacks(join(base, 'checkpoints'));
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** The inode numbers (hex, as fdinfo has them) of every directory this process watches through inotify. */
function watchedInodes(): string[] {
  const inodes: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue;
    }
    if (target !== 'anon_inode:inotify') continue;
    for (const match of readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8').matchAll(/^inotify wd:\d+ ino:([0-9a-f]+)/gm)) inodes.push(match[1]!);
  }
  return inodes;
}

const inodeOf = (path: string): string => statSync(path).ino.toString(16);

describe('tree watch against a hostile view', () => {
  it('never watches a host directory a view\'s directory was swapped for a link to, nor hears its changes', async () => {
    const outside = freshDir();
    writeFileSync(join(outside, 'secret'), 'host secret');
    const view = freshDir();
    mkdirSync(join(view, 'd0'));
    writeFileSync(join(view, 'd0/f'), 'mine');
    const first = (await captureInto(packs, view)).manifest;
    expect(watchedInodes()).toContain(inodeOf(join(view, 'd0')));

    renameSync(join(view, 'd0'), join(view, 'd0-old'));
    symlinkSync(outside, join(view, 'd0'));
    const second = (await captureInto(packs, view, first)).manifest;
    expect(second.entries.find((e) => e.path === 'd0')).toMatchObject({ type: 'symlink', target: outside });
    expect(JSON.stringify(second)).not.toContain('host secret');
    expect(watchedInodes()).not.toContain(inodeOf(outside));

    writeFileSync(join(outside, 'secret'), 'changed on the host');
    writeFileSync(join(outside, 'planted'), 'x');
    expect([...treeWatches.of(view)!.changedSince(second)!.changed]).toEqual([]);
  });

  it(`holds no watch for a view of more than ${MAX_WATCHED_DIRS} directories, and captures it in full`, async () => {
    const view = freshDir();
    for (let d = 0; d <= MAX_WATCHED_DIRS; d++) mkdirSync(join(view, `d${d}`));
    writeFileSync(join(view, `d${MAX_WATCHED_DIRS}/last`), 'last');
    const before = treeWatches.watching;
    const first = (await captureInto(packs, view)).manifest;
    expect(treeWatches.watching).toBe(before);
    expect(first.entries).toHaveLength(MAX_WATCHED_DIRS + 2);
    expect(treeWatches.of(view)!.changedSince(first)).toBeUndefined();
  });

  it('lets go of its watches when the view is removed, or when a command floods it with changes', async () => {
    const gone = freshDir();
    const flooded = freshDir();
    for (const view of [gone, flooded]) for (let d = 0; d < 5; d++) mkdirSync(join(view, `d${d}`), { recursive: true });
    const before = treeWatches.watching;
    const manifests = [(await captureInto(packs, gone)).manifest, (await captureInto(packs, flooded)).manifest];
    expect(treeWatches.watching).toBe(before + 12);

    rmSync(gone, { recursive: true });
    for (let i = 0; i <= MAX_CHANGED_PATHS; i++) writeFileSync(join(flooded, `d${i % 5}/n${i}`), '');
    treeWatches.pump();
    expect(treeWatches.watching).toBe(before);
    expect(treeWatches.of(flooded)!.changedSince(manifests[1]!)).toBeUndefined();
    // The flooded view is still captured as it is.
    const after = (await captureInto(packs, flooded, manifests[1])).manifest;
    expect(after.files).toBe(MAX_CHANGED_PATHS + 1);
    expect(Object.keys(describeTree(flooded))).toHaveLength(after.entries.length);
  });

  // A directory on a filesystem written from elsewhere (here bindfs, a FUSE mount: a write beneath it raises no
  // event at it) must never be taken on trust, and the watches placed before the walk reached it must not stay held.
  const bindfs = process.getuid?.() === 0 && existsSync('/dev/fuse') && spawnSync('bindfs', ['--version']).status === 0;
  it.skipIf(!bindfs)('holds no watch for a view that holds a mount written from elsewhere, and captures its changes (bindfs; needs root)', async () => {
    const source = freshDir();
    writeFileSync(join(source, 'f'), 'before');
    const view = freshDir();
    for (let d = 0; d < 200; d++) mkdirSync(join(view, `d${d}`));
    mkdirSync(join(view, 'zz-mount'));
    execFileSync('bindfs', [source, join(view, 'zz-mount')]);
    try {
      const before = treeWatches.watching;
      const first = (await captureInto(packs, view)).manifest;
      expect(treeWatches.watching).toBe(before);
      writeFileSync(join(source, 'f'), 'written beneath the mount');
      expect(treeWatches.of(view)!.changedSince(first)).toBeUndefined();
      const next = (await captureInto(packs, view, first)).manifest;
      expect(next.entries.find((e) => e.path === 'zz-mount/f')!.size).toBe('written beneath the mount'.length);
    } finally {
      execFileSync('umount', [join(view, 'zz-mount')]);
    }
  });
});
