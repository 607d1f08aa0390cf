/**
 * Which filesystems show every change made after a look at a file's ctime. Linux since 6.13 gives ext4, xfs, btrfs
 * and tmpfs "multigrain" timestamps: once a ctime has been read, the next change of that inode takes a fine-grained
 * time, later than the one read. On such a filesystem a version hashed after its stats were taken can be remembered
 * at once (file-stamp.ts): any later change moves the ctime. Elsewhere a change within the same clock tick (a whole
 * second on some filesystems) keeps it, and a version is remembered only once the file has settled.
 */
import { closeSync, fstatSync, mkdirSync, openSync, unlinkSync, writeSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';

const fineDevices = new Set<bigint>();
const probedDevices = new Set<bigint>();

/** Changes made right after a look: a coarse clock leaves nearly all of them at the ctime looked at. */
const TRIALS = 64;

/** Whether a change right after each look at the ctime always moved it, tried in a file of `dir`'s filesystem. */
export function learnCtimeGrain(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `.berth-ctime-probe-${randomBytes(6).toString('hex')}`);
  const fd = openSync(file, 'wx', 0o600);
  try {
    const dev = fstatSync(fd, { bigint: true }).dev;
    if (probedDevices.has(dev)) return;
    let fine = true;
    for (let i = 0; i < TRIALS && fine; i++) {
      const looked = fstatSync(fd, { bigint: true }).ctimeNs;
      writeSync(fd, 'x');
      fine = fstatSync(fd, { bigint: true }).ctimeNs > looked;
    }
    probedDevices.add(dev);
    if (fine) fineDevices.add(dev);
  } finally {
    closeSync(fd);
    unlinkSync(file);
  }
}

/** True when `dev` was probed and every change there after a look at a ctime moves it. */
export const fineCtime = (dev: bigint): boolean => fineDevices.has(dev);
