import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { removeTree } from '../../../src/content/remove-tree.ts';

let base: string;
beforeEach(() => {
  base = mkdtempSync(path.join(tmpdir(), 'berth-remove-tree-'));
});
afterEach(() => {
  execFileSync('rm', ['-rf', base]);
});

/** 24 directories of 250 bytes (6,000 bytes deep, past PATH_MAX), made read-only, with a file at the bottom. */
function deepReadOnlyTree(top: string): void {
  const script = 'import os, sys\nos.makedirs(sys.argv[1])\nos.chdir(sys.argv[1])\nfor _ in range(24):\n    os.mkdir("d" * 250)\n    os.chdir("d" * 250)\nopen("file", "w").write("x")\n';
  execFileSync('python3', ['-c', script, top]);
  execFileSync('chmod', ['-R', 'a-w', top]);
}

describe('removeTree', () => {
  it('should remove a read-only tree deeper than PATH_MAX, which a recursive rm cannot', async () => {
    const top = path.join(base, 'deep');
    deepReadOnlyTree(top);
    await expect(rm(top, { recursive: true, force: true })).rejects.toMatchObject({ code: 'ENAMETOOLONG' });
    await removeTree(top);
    expect(existsSync(top)).toBe(false);
  });

  it('should accept a missing directory', async () => {
    await removeTree(path.join(base, 'missing'));
    expect(existsSync(base)).toBe(true);
  });
});
