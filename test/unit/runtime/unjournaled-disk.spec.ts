/**
 * `berth serve` warns when its data directory is on ext4 without a journal (unjournaled-disk.ts). Real filesystems:
 * two small ext4 images, one made without a journal, loop-mounted, and a tmpfs (needs root, loop devices and mkfs.ext4); /proc, /sys.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unjournaledExt4 } from '../../../src/runtime/core/unjournaled-disk.ts';

const canMount = process.getuid?.() === 0 && existsSync('/dev/loop-control') && spawnSync('mkfs.ext4', ['-V']).status === 0;
let root: string;
const mounted: string[] = [];

/** An ext4 image of 32 MiB made with `features`, loop-mounted; its mount point. */
function ext4(name: string, features: string[]): string {
  const image = join(root, `${name}.img`);
  const at = join(root, name);
  writeFileSync(image, '');
  execFileSync('truncate', ['-s', '32M', image]);
  execFileSync('mkfs.ext4', ['-q', '-F', ...features, image]);
  mkdirSync(at);
  execFileSync('mount', ['-o', 'loop', image, at]);
  mounted.push(at);
  return at;
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'berth-unjournaled-'));
});
afterAll(() => {
  for (const at of mounted) spawnSync('umount', [at]);
  rmSync(root, { recursive: true, force: true });
});

describe('the data directory\'s filesystem', () => {
  it.skipIf(!canMount)('names the device of ext4 made without a journal, and nothing for one made with it (needs root)', () => {
    const bare = ext4('bare', ['-O', '^has_journal']);
    const journaled = ext4('journaled', []);
    mkdirSync(join(bare, 'data'));
    expect(unjournaledExt4(join(bare, 'data'))).toMatch(/^loop\d+$/);
    expect(unjournaledExt4(journaled)).toBeUndefined();
    const memory = join(root, 'memory');
    mkdirSync(memory);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1M', 'berth-test', memory]);
    mounted.push(memory);
    expect(unjournaledExt4(memory)).toBeUndefined();
  });

  it('says nothing of a filesystem on no block device', () => {
    for (const dir of ['/proc', '/sys']) expect(unjournaledExt4(dir), dir).toBeUndefined();
  });
});
