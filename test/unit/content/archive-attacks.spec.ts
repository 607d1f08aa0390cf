import { readFileSync, existsSync, lstatSync } from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { craftTar, memberHead, tarHeader, type CraftedMember } from './crafted-tar.ts';
import { expectConfined, importFixture, refusedWith, sourcePaths, type ImportFixture } from './import-fixture.ts';

let fx: ImportFixture;
beforeEach(() => {
  fx = importFixture();
});
afterEach(() => fx.cleanup());

const ok: CraftedMember = { name: 'ok.txt', content: Buffer.from('fine') };
const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

function reasons(result: { skippedReasons: Array<{ reason: string; count: number }> }): Record<string, number> {
  return Object.fromEntries(result.skippedReasons.map((r) => [r.reason, r.count]));
}

/** Stream `parts` (generated lazily) through gzip, counting the uncompressed bytes actually produced. */
function gzipped(parts: () => Generator<Buffer>) {
  const stats = { produced: 0 };
  const source = Readable.from(
    (function* () {
      for (const part of parts()) {
        stats.produced += part.length;
        yield part;
      }
    })(),
  );
  return { body: source.pipe(createGzip({ level: 1 })), stats };
}

describe('archive import attacks: members that must not land are dropped and counted, never written', () => {
  it.each<[string, CraftedMember[], Record<string, number>]>([
    ['a `..` path', [{ name: '../evil', content: Buffer.from('x') }, { name: 'a/../../evil', content: Buffer.from('x') }], { parent_segment: 2 }],
    ['an absolute path', [{ name: '/abs/path', content: Buffer.from('x') }], { absolute_path: 1 }],
    ['a backslash path', [{ name: '..\\evil', content: Buffer.from('x') }], { backslash: 1 }],
    ['a drive letter', [{ name: 'C:/evil', content: Buffer.from('x') }], { drive_letter: 1 }],
    [
      'a symlink to /etc then a file written through it',
      [{ name: 'etc', type: '2', linkname: '/etc' }, { name: 'etc/berth-evil', content: Buffer.from('pwned') }],
      { symlink: 1, through_link: 1 },
    ],
    [
      'a relative symlink out of the root then a file through it',
      [{ name: 'up', type: '2', linkname: '../../../../../../tmp' }, { name: 'up/berth-evil', content: Buffer.from('pwned') }],
      { symlink: 1, through_link: 1 },
    ],
    [
      'a hardlink to a file outside, then a write to its name',
      [{ name: 'passwd', type: '1', linkname: '/etc/passwd' }, { name: 'passwd', content: Buffer.from('root::0:0::/:/bin/sh\n') }],
      { hardlink: 1, through_link: 1 },
    ],
    ['a hardlink to a member inside', [{ name: 'a.txt', content: Buffer.from('a') }, { name: 'b.txt', type: '1', linkname: 'a.txt' }], { hardlink: 1 }],
    ['a NUL byte in a pax path', [{ name: 'innocent', pax: { path: 'nul\0/../../evil' }, content: Buffer.from('x') }], { nul_byte: 1 }],
    ['a NUL byte in a GNU long name', [{ name: '././@LongLink', gnuLongName: Buffer.from('a\0/../../evil\0'), content: Buffer.from('x') }], { nul_byte: 1 }],
    ['a character device and a fifo', [{ name: 'null', type: '3' }, { name: 'pipe', type: '6' }], { special_file: 2 }],
    ['an unknown member type', [{ name: 'sparse', type: 'S', content: Buffer.from('x') }], { unsupported_type: 1 }],
    [
      'dependency directories at any depth',
      [{ name: 'node_modules/x/index.js', content: Buffer.from('x') }, { name: 'lib/.venv/bin/python', content: Buffer.from('x') }],
      { dependency_dir: 2 },
    ],
  ])('should drop %s', async (_label, members, expected) => {
    const passwd = readFileSync('/etc/passwd');
    const result = await fx.content.importArchive([craftTar([...members, ok])]);
    expect(reasons(result)).toEqual(expected);
    expect(result.skipped).toBe(Object.values(expected).reduce((a, b) => a + b, 0));
    expect(readFileSync(path.join(fx.content.layout.source, 'ok.txt'), 'utf8')).toBe('fine');
    expect(readFileSync('/etc/passwd').equals(passwd)).toBe(true);
    for (const p of sourcePaths(fx.content)) expect(lstatSync(path.join(fx.content.layout.source, p)).isSymbolicLink()).toBe(false);
    expectConfined(fx);
  });

  it('should keep a directory and drop a later symlink of the same name, so files below land in the real directory', async () => {
    const result = await fx.content.importArchive([
      craftTar([{ name: 'd/', type: '5' }, { name: 'd', type: '2', linkname: '/etc' }, { name: 'd/inner.txt', content: Buffer.from('in') }, ok]),
    ]);
    expect(reasons(result)).toEqual({ symlink: 1 });
    expect(lstatSync(path.join(fx.content.layout.source, 'd')).isDirectory()).toBe(true);
    expect(readFileSync(path.join(fx.content.layout.source, 'd/inner.txt'), 'utf8')).toBe('in');
    expect(existsSync('/etc/inner.txt')).toBe(false);
    expectConfined(fx);
  });

  it('should refuse a 1 GiB zero-filled tar.gz from its header, having read almost none of it', async () => {
    const { body, stats } = gzipped(function* () {
      yield tarHeader({ name: 'zeros.bin', type: '0', size: GiB });
      for (let i = 0; i < 1024; i++) yield Buffer.alloc(MiB);
    });
    const error = await refusedWith(fx.content.importArchive(body));
    expect(error.code).toBe('environment_invalid');
    expect(error.detail.reason).toBe('too_large');
    expect(stats.produced).toBeLessThan(64 * MiB);
    expectConfined(fx);
  });

  it('should refuse a 1 GiB zero-filled tar.gz of 64 MiB members by compression ratio while it streams', async () => {
    const { body, stats } = gzipped(function* () {
      for (let m = 0; m < 16; m++) {
        yield tarHeader({ name: `zeros-${m}.bin`, type: '0', size: 64 * MiB });
        for (let i = 0; i < 64; i++) yield Buffer.alloc(MiB);
      }
      yield Buffer.alloc(1024);
    });
    const error = await refusedWith(fx.content.importArchive(body));
    expect(error.detail.reason).toBe('compression_ratio');
    expect(stats.produced).toBeLessThan(32 * MiB);
    expectConfined(fx);
  });

  it('should refuse 100,000 empty entries once the 50,000th is passed, and write none of them', async () => {
    const stats = { headers: 0 };
    const body = Readable.from(
      (function* () {
        for (let batch = 0; batch < 100; batch++) {
          const headers: Buffer[] = [];
          for (let i = 0; i < 1000; i++) headers.push(memberHead({ name: `e/${batch}-${i}`, size: 0 }));
          stats.headers += 1000;
          yield Buffer.concat(headers);
        }
        yield Buffer.alloc(1024);
      })(),
    );
    const error = await refusedWith(fx.content.importArchive(body));
    expect(error.detail).toMatchObject({ reason: 'too_many_entries', limit: 50_000 });
    expect(stats.headers).toBeLessThan(60_000);
    expect(existsSync(fx.content.layout.source)).toBe(false);
    expectConfined(fx);
  }, 60_000);

  it('should refuse a damaged archive and leave the existing source untouched', async () => {
    await fx.content.source.write('keep.txt', [Buffer.from('keep')]);
    const tar = craftTar([ok, { name: 'big.bin', content: Buffer.alloc(100_000, 7) }]);
    const truncated = await refusedWith(fx.content.importArchive([tar.subarray(0, 2048)], { replace: true }));
    expect(truncated.detail.reason).toBe('corrupt_archive');
    const badSum = Buffer.from(tar);
    badSum[1024 + 10] ^= 0xff; // inside the second header's name
    expect((await refusedWith(fx.content.importArchive([badSum], { replace: true }))).detail.reason).toBe('corrupt_archive');
    expect(sourcePaths(fx.content)).toEqual(['keep.txt']);
    expectConfined(fx);
  });

  it('should refuse bodies that are not a tar, tar.gz or zip', async () => {
    expect((await refusedWith(fx.content.importArchive([]))).detail.reason).toBe('empty_archive');
    expect((await refusedWith(fx.content.importArchive([Buffer.from('{"git": {}}')]))).detail.reason).toBe('unsupported_archive');
    const { body } = gzipped(function* () {
      yield Buffer.from('just text, gzipped\n'.repeat(100));
    });
    expect((await refusedWith(fx.content.importArchive(body))).detail.reason).toBe('unsupported_archive');
    expectConfined(fx);
  });
});
