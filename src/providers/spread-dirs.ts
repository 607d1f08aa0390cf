/**
 * Marks a directory whose subdirectories are short-lived trees of their own (a spool: one directory per command,
 * removed once its output is saved) as a top of directory hierarchies (ext4's FS_TOPDIR_FL, `chattr +T`), so ext4
 * spreads its new subdirectories over the block groups instead of keeping each beside its parent.
 *
 * Why: on ext4 without a journal the kernel skips, at every inode it allocates, each inode of the group freed in the
 * last 60 to 300 s (fs/ext4/ialloc.c, recently_deleted). A spool kept in one group makes every create pay for the
 * removals of the minutes before. Measured on this machine's 256 GiB root disk without a journal (9 files per
 * directory, 1,000 directories made and removed a second): 85 to 600 us a create unmarked, 25 to 45 us marked; with a
 * journal, 18 us either way. Only a filesystem of many groups has room to spread (a 4 GiB one has two flex groups: no
 * gain there). A hint only: without the addon, or on a filesystem without the flag (tmpfs, xfs, btrfs), nothing is
 * done.
 */
import { closeSync } from 'node:fs';
import { loadAddon } from './addon.ts';
import { openDir } from './spool-dir.ts';

const addon = loadAddon<{ markTopDir(dirFd: number): number }>('berth_dirflags');

/** The directory open as `dir` (a descriptor, or a path opened as spool roots are: its last component never followed). */
export function spreadSubdirectories(dir: number | string): void {
  if (!addon) return;
  if (typeof dir === 'number') {
    addon.markTopDir(dir);
    return;
  }
  const fd = openDir(dir);
  if (fd === undefined) return;
  try {
    addon.markTopDir(fd);
  } finally {
    closeSync(fd);
  }
}

