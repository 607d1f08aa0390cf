/**
 * Whether a directory lives on ext4 without a journal (a common VM root disk), which `berth serve` warns about: there
 * every inode allocation skips each inode of its group freed in the last 60 s (300 s while its inode-table block is
 * unwritten; the kernel's `recently_deleted`), so under the spool's churn (each command makes and later removes nine
 * files) a file create costs hundreds of microseconds of kernel time instead of about 20, growing with the rate of
 * commands. Read from /sys alone (no access to the device): the directory's device number names the block device
 * in /sys/dev/block, and an ext4 mount of it has /sys/fs/ext4/<name>, whose journal_task is `<none>` without a journal.
 */
import { readFileSync, readlinkSync, statSync } from 'node:fs';
import { basename } from 'node:path';

/** The block device's kernel name (e.g. `vda`, `dm-0`) when `dir` is on ext4 without a journal; else undefined. */
export function unjournaledExt4(dir: string): string | undefined {
  const { dev } = statSync(dir, { bigint: true });
  // glibc's gnu_dev_major/minor: 12 bits of major and 20 of minor, split across the 64-bit number.
  const major = ((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn);
  const minor = (dev & 0xffn) | ((dev >> 12n) & ~0xffn);
  try {
    const name = basename(readlinkSync(`/sys/dev/block/${major}:${minor}`));
    return readFileSync(`/sys/fs/ext4/${name}/journal_task`, 'utf8').trim() === '<none>' ? name : undefined;
  } catch {
    return undefined; // not a block device (tmpfs, overlay, a network filesystem), not ext4, or no /sys
  }
}
