/**
 * When a file's stats can be trusted to show any later change: what lets a hash of its bytes, taken after the stats,
 * stand for the file until they move (the tools' remembered versions, file-stamp.ts; a checkpoint's stat hints,
 * tree-capture.ts). Linux since 6.13 gives ext4, xfs, btrfs and tmpfs "multigrain" timestamps: once a ctime has been
 * read, the inode's next change takes a fine-grained time, later than the one read, so the stats can be trusted at
 * once. Elsewhere a change within the same clock tick (a jiffy, a whole second, two on FAT) keeps size, mtime and
 * ctime as they were (git's "racily clean" entries), and only a file whose ctime was SETTLED_NS older than the look
 * can be trusted.
 */
import { closeSync, fstatSync, mkdirSync, openSync, statSync, unlinkSync, writeSync, type BigIntStats } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

/** Each probed filesystem (by device) and whether its ctimes are fine. */
const grain = new Map<bigint, boolean>();

/** Changes made right after a look: a coarse clock leaves nearly all of them at the ctime looked at. */
const TRIALS = 64;

/** Whether a change right after each look at the ctime always moved it, tried in a file of `dir`'s filesystem. */
export function learnCtimeGrain(dir: string): void {
  mkdirSync(dir, { recursive: true });
  if (grain.has(statSync(dir, { bigint: true }).dev)) return;
  const file = path.join(dir, `.berth-ctime-probe-${randomBytes(6).toString('hex')}`);
  const fd = openSync(file, 'wx', 0o600);
  try {
    let fine = true;
    for (let i = 0; i < TRIALS && fine; i++) {
      const looked = fstatSync(fd, { bigint: true }).ctimeNs;
      writeSync(fd, 'x');
      fine = fstatSync(fd, { bigint: true }).ctimeNs > looked;
    }
    grain.set(fstatSync(fd, { bigint: true }).dev, fine);
  } finally {
    closeSync(fd);
    unlinkSync(file);
  }
}

/** True when `dev` was probed and every change there after a look at a ctime moves it. */
export const fineCtime = (dev: bigint): boolean => grain.get(dev) === true;

const SETTLED_NS = 2_000_000_000n;

/** Whether any change of the file after `stats` were taken (at `takenAtNs` or later) moves its ctime. */
export const ctimeWillMove = (stats: BigIntStats, takenAtNs: bigint): boolean => fineCtime(stats.dev) || stats.ctimeNs + SETTLED_NS < takenAtNs;
