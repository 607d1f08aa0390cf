import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../../schemas/errors.ts';
import { parseContentPath, resolveContentPath, splitRelativePath } from '../../../src/content/content-path.ts';

let root: string;
beforeEach(() => {
  root = mkdtempSync(path.join(tmpdir(), 'berth-path-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

async function refusal(promise: Promise<unknown> | (() => unknown)): Promise<Record<string, unknown>> {
  try {
    await (typeof promise === 'function' ? promise() : promise);
  } catch (e) {
    if (isBerthError(e, 'environment_invalid')) return e.detail;
    throw e;
  }
  throw new Error('expected environment_invalid');
}

describe('content paths', () => {
  it('should normalise harmless spellings: `.` segments and one trailing slash', () => {
    expect(splitRelativePath('a/./b/')).toEqual({ segments: ['a', 'b'] });
    expect(splitRelativePath('./x')).toEqual({ segments: ['x'] });
    expect(splitRelativePath('.')).toEqual({ segments: [] });
  });

  it.each([
    ['../evil', 'parent_segment'],
    ['a/../../b', 'parent_segment'],
    ['a/..', 'parent_segment'],
    ['/etc/passwd', 'absolute_path'],
    ['..\\evil', 'backslash'],
    ['a\\b', 'backslash'],
    ['C:/Windows', 'drive_letter'],
    ['c:evil', 'drive_letter'],
    ['a\0b', 'nul_byte'],
    ['a//b', 'empty_segment'],
    ['', 'empty_path'],
    [`${'x'.repeat(256)}/y`, 'name_too_long'],
  ])('should refuse %j with environment_invalid (%s)', async (raw, reason) => {
    expect((await refusal(() => parseContentPath(raw))).reason).toBe(reason);
  });

  it('should resolve a path under the root and say what is there', async () => {
    mkdirSync(path.join(root, 'a/b'), { recursive: true });
    writeFileSync(path.join(root, 'a/b/f.txt'), 'x');
    expect(await resolveContentPath(root, 'a/b/f.txt')).toMatchObject({ abs: path.join(root, 'a/b/f.txt'), rel: 'a/b/f.txt', existing: 'file' });
    expect((await resolveContentPath(root, 'a/b/')).existing).toBe('directory');
    expect((await resolveContentPath(root, 'a/new/deeper')).existing).toBeNull();
    expect((await resolveContentPath(root, '', { allowRoot: true })).existing).toBe('directory');
    expect((await refusal(resolveContentPath(root, ''))).reason).toBe('empty_path');
  });

  it('should refuse a path through a symlink, without following it', async () => {
    symlinkSync('/etc', path.join(root, 'etc'));
    symlinkSync(path.join(root, 'a'), path.join(root, 'inside'));
    mkdirSync(path.join(root, 'a'));
    expect(await refusal(resolveContentPath(root, 'etc/passwd'))).toMatchObject({ reason: 'symlink', at: 'etc' });
    expect(await refusal(resolveContentPath(root, 'etc'))).toMatchObject({ reason: 'symlink' });
    // Even a link that stays inside the root is refused: a path names one place only.
    expect(await refusal(resolveContentPath(root, 'inside/x'))).toMatchObject({ reason: 'symlink' });
  });

  it('should refuse a fifo or a socket, and a file used as a directory', async () => {
    execFileSync('mkfifo', [path.join(root, 'pipe')]);
    execFileSync('python3', ['-c', `import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(path.join(root, 'sock'))})`]);
    writeFileSync(path.join(root, 'file'), 'x');
    expect((await refusal(resolveContentPath(root, 'pipe'))).reason).toBe('special_file');
    expect((await refusal(resolveContentPath(root, 'sock'))).reason).toBe('special_file');
    expect((await refusal(resolveContentPath(root, 'file/below'))).reason).toBe('not_a_directory');
  });

  it.skipIf(process.getuid?.() !== 0)('should refuse a device node (mknod needs root)', async () => {
    symlinkSync('/dev/null', path.join(root, 'null-link'));
    expect((await refusal(resolveContentPath(root, 'null-link'))).reason).toBe('symlink');
    execFileSync('mknod', [path.join(root, 'null'), 'c', '1', '3']);
    expect((await refusal(resolveContentPath(root, 'null'))).reason).toBe('special_file');
  });
});
