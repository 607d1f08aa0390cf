/**
 * Marking spool roots `chattr +T` (spread-dirs.ts, through the berth_dirflags addon) as a hostile tenant would try
 * it: a link planted where a spool root or the spares directory is expected must not carry the mark (nor any flag
 * change) to the directory it points at, and the mark sets TOPDIR alone (no flag the tenant could use, such as
 * append-only or immutable, is ever written). Only the host's own paths are marked, once per root opened: nothing a
 * request sends reaches it, so there is nothing to exhaust.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statfsSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Spool } from '../../src/providers/spool.ts';
import { spreadSubdirectories } from '../../src/providers/spread-dirs.ts';

const root = mkdtempSync(join(tmpdir(), 'berth-spread-sec-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const onExt4 = statfsSync(root).type === 0xef53;
if (!onExt4) console.log(`skipped: spread-dirs security specs need ${tmpdir()} on ext4 (the only filesystem with the flag)`);

const attributes = (dir: string): string => spawnSync('lsattr', ['-d', dir], { encoding: 'utf8' }).stdout.split(' ')[0]!;

describe.skipIf(!onExt4)('marking spool roots against planted links', () => {
  it('a link in place of a spool root: refused, and the directory it points at keeps its flags', async () => {
    const victim = join(root, 'victim');
    mkdirSync(victim);
    const before = attributes(victim);
    symlinkSync(victim, join(root, 'spool-root'));
    await expect(new Spool(join(root, 'spool-root')).create('op')).rejects.toMatchObject({ code: 'internal' });
    expect(attributes(victim)).toBe(before);
    expect(attributes(victim)).not.toContain('T');
  });

  it('a link given by path is not followed: nothing is marked', () => {
    const victim = join(root, 'victim-2');
    mkdirSync(victim);
    symlinkSync(victim, join(root, 'link-2'));
    expect(() => spreadSubdirectories(join(root, 'link-2'))).toThrow(/not a directory/);
    expect(attributes(victim)).not.toContain('T');
  });

  it('sets TOPDIR and nothing else', () => {
    const dir = join(root, 'only-t');
    mkdirSync(dir);
    const before = attributes(dir);
    spreadSubdirectories(dir);
    const after = attributes(dir);
    expect([...after].filter((c, i) => c !== before[i])).toEqual(['T']);
  });
});
