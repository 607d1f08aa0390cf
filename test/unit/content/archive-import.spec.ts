import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, createReadStream, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { craftTar, memberHead } from './crafted-tar.ts';
import { expectConfined, importFixture, refusedWith, sourcePaths, type ImportFixture } from './import-fixture.ts';

let fx: ImportFixture;
beforeEach(() => {
  fx = importFixture();
});
afterEach(() => fx.cleanup());

const longDir = `${'d'.repeat(90)}/${'e'.repeat(90)}`;
const longName = `${'n'.repeat(120)}.txt`;

/** A project under `<scratch>/src/<wrapper>`: text, binary, an executable, a long path, an empty directory. */
function writeProject(wrapper = 'project'): { root: string; binary: Buffer } {
  const root = path.join(fx.scratch, 'src', wrapper);
  const binary = randomBytes(300_000);
  mkdirSync(path.join(root, 'scripts'), { recursive: true });
  mkdirSync(path.join(root, longDir), { recursive: true });
  mkdirSync(path.join(root, 'assets/empty'), { recursive: true });
  writeFileSync(path.join(root, 'README.md'), 'hello\n'.repeat(1000));
  writeFileSync(path.join(root, 'assets/blob.bin'), binary);
  writeFileSync(path.join(root, 'scripts/run.sh'), '#!/bin/sh\necho run\n');
  chmodSync(path.join(root, 'scripts/run.sh'), 0o755);
  writeFileSync(path.join(root, longDir, longName), 'long');
  return { root, binary };
}

const projectPaths = [
  'README.md',
  'assets/',
  'assets/blob.bin',
  'assets/empty/',
  `${'d'.repeat(90)}/`,
  `${longDir}/`,
  `${longDir}/${longName}`,
  'scripts/',
  'scripts/run.sh',
].sort();

function expectProject(binary: Buffer): void {
  const src = fx.content.layout.source;
  expect(sourcePaths(fx.content)).toEqual(projectPaths);
  expect(readFileSync(path.join(src, 'assets/blob.bin')).equals(binary)).toBe(true);
  expect(readFileSync(path.join(src, 'README.md'), 'utf8')).toBe('hello\n'.repeat(1000));
  expect(readFileSync(path.join(src, longDir, longName), 'utf8')).toBe('long');
  expect(statSync(path.join(src, 'scripts/run.sh')).mode & 0o111).not.toBe(0);
  expect(statSync(path.join(src, 'README.md')).mode & 0o111).toBe(0);
}

describe('archive import', () => {
  it.each([
    ['gnu', ['--format=gnu']],
    ['pax', ['--format=pax']],
    ['gnu, gzipped', ['--format=gnu', '-z']],
  ])('should import a %s tar made by system tar, byte-exact, stripping the wrapper directory', async (_format, flags) => {
    const { binary } = writeProject();
    const archive = path.join(fx.scratch, 'p.tar');
    execFileSync('tar', [...flags, '-C', path.join(fx.scratch, 'src'), '-cf', archive, 'project']);
    const result = await fx.content.importArchive(createReadStream(archive));
    expect(result).toMatchObject({ files: 4, bytes: 6000 + 300_000 + 19 + 4, skipped: 0, strippedPrefix: 'project' });
    expectProject(binary);
    expectConfined(fx);
  });

  it('should join the ustar prefix and name fields of a long path', async () => {
    // 150 characters: only the prefix field can hold it, as ustar has no long-name records.
    const deep = `${'u'.repeat(90)}/${'v'.repeat(50)}`;
    const dir = path.join(fx.scratch, 'src', 'project', deep);
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, 'f.txt'), 'ustar');
    const archive = path.join(fx.scratch, 'p.tar');
    execFileSync('tar', ['--format=ustar', '-C', path.join(fx.scratch, 'src'), '-cf', archive, 'project']);
    await fx.content.importArchive(createReadStream(archive));
    expect(readFileSync(path.join(fx.content.layout.source, deep, 'f.txt'), 'utf8')).toBe('ustar');
  });

  it('should detect the archive by its bytes, not its name, and read `./`-prefixed members', async () => {
    const { root, binary } = writeProject();
    const archive = path.join(fx.scratch, 'looks-like.zip');
    execFileSync('tar', ['-C', root, '-czf', archive, '.']);
    expect((await fx.content.importArchive(createReadStream(archive))).strippedPrefix).toBeUndefined();
    expectProject(binary);
  });

  it('should read base-256 sizes and pax sizes', async () => {
    const paxSized = Buffer.concat([memberHead({ name: 'pax.txt', size: 0, pax: { size: '5' } }), Buffer.from('hello'), Buffer.alloc(507)]);
    const tar = Buffer.concat([craftTar([{ name: 'b256.txt', content: Buffer.from('base-256'), base256Size: true }]).subarray(0, 1024), paxSized, Buffer.alloc(1024)]);
    await fx.content.importArchive([tar]);
    expect(readFileSync(path.join(fx.content.layout.source, 'b256.txt'), 'utf8')).toBe('base-256');
    expect(readFileSync(path.join(fx.content.layout.source, 'pax.txt'), 'utf8')).toBe('hello');
  });

  it('should stream a big member to disk, and let a repeated name win in archive order', async () => {
    const big = randomBytes(3 * 1024 * 1024 + 17);
    const result = await fx.content.importArchive([
      craftTar([
        { name: 'big.bin', content: Buffer.from('first, small') },
        { name: 'big.bin', content: big },
        { name: 'small.txt', content: randomBytes(100) },
        { name: 'small.txt', content: Buffer.from('last'), mode: 0o755 },
      ]),
    ]);
    expect(result).toMatchObject({ files: 2, bytes: big.length + 4, skipped: 0 });
    expect(readFileSync(path.join(fx.content.layout.source, 'big.bin')).equals(big)).toBe(true);
    expect(readFileSync(path.join(fx.content.layout.source, 'small.txt'), 'utf8')).toBe('last');
    expect(statSync(path.join(fx.content.layout.source, 'small.txt')).mode & 0o777).toBe(0o755);
  });

  it('should not strip a single top-level directory that sits beside files, nor a single file', async () => {
    await fx.content.importArchive([craftTar([{ name: 'lib/a.js', content: Buffer.from('a') }, { name: 'index.js', content: Buffer.from('i') }])]);
    expect(sourcePaths(fx.content)).toEqual(['index.js', 'lib/', 'lib/a.js']);
    await fx.content.importArchive([craftTar([{ name: 'only.txt', content: Buffer.from('o') }])], { replace: true });
    expect(sourcePaths(fx.content)).toEqual(['only.txt']);
  });

  it('should merge over the source by default, and replace it with replace: true', async () => {
    const src = fx.content.source;
    await src.write('a.txt', [Buffer.from('old a')]);
    await src.write('keep.txt', [Buffer.from('keep')]);
    await src.write('dir/x.txt', [Buffer.from('x')]);
    await src.write('was-dir/inner.txt', [Buffer.from('inner')]);
    const archive = craftTar([
      { name: 'a.txt', content: Buffer.from('new a') },
      { name: 'dir/y.txt', content: Buffer.from('y') },
      { name: 'was-dir', content: Buffer.from('now a file') },
    ]);
    const merged = await fx.content.importArchive([archive]);
    expect(merged).toMatchObject({ files: 3, skipped: 0 });
    expect(sourcePaths(fx.content)).toEqual(['a.txt', 'dir/', 'dir/x.txt', 'dir/y.txt', 'keep.txt', 'was-dir']);
    expect(readFileSync(path.join(src.dir, 'a.txt'), 'utf8')).toBe('new a');
    expect(readFileSync(path.join(src.dir, 'was-dir'), 'utf8')).toBe('now a file');

    await fx.content.importArchive([archive], { replace: true });
    expect(sourcePaths(fx.content)).toEqual(['a.txt', 'dir/', 'dir/y.txt', 'was-dir']);
    expectConfined(fx);
  });

  it('should import a zip with deflated and stored members, dropping its symlinks', async () => {
    const { root, binary } = writeProject();
    symlinkSync('/etc/passwd', path.join(root, 'passwd-link'));
    symlinkSync('README.md', path.join(root, 'inner-link'));
    const archive = path.join(fx.scratch, 'p.zip');
    execFileSync('zip', ['-q', '-r', '-y', archive, 'project'], { cwd: path.join(fx.scratch, 'src') });
    const listing = execFileSync('unzip', ['-v', archive], { encoding: 'utf8' });
    expect(listing).toMatch(/Defl:N/);
    expect(listing).toMatch(/Stored/);

    const result = await fx.content.importArchive(createReadStream(archive));
    expect(result).toMatchObject({ files: 4, skipped: 2, strippedPrefix: 'project' });
    expect(result.skippedReasons).toEqual([{ reason: 'symlink', count: 2, examples: ['project/inner-link', 'project/passwd-link'].sort() }]);
    expectProject(binary);
    expectConfined(fx);
  });

  it('should drop zip members with escaping names and refuse a zip whose data fails its CRC', async () => {
    const archive = path.join(fx.scratch, 'evil.zip');
    execFileSync('python3', [
      '-c',
      `
import zipfile, sys
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
    z.writestr('../zip-evil', 'x')
    z.writestr('/abs/zip', 'x')
    z.writestr('..\\\\zip-evil', 'x')
    link = zipfile.ZipInfo('etc')
    link.create_system = 3
    link.external_attr = (0o120777 << 16)
    z.writestr(link, '/etc')
    z.writestr('etc/berth-evil', 'through the link')
    fifo = zipfile.ZipInfo('pipe')
    fifo.create_system = 3
    fifo.external_attr = (0o010644 << 16)
    z.writestr(fifo, '')
    z.writestr('ok.txt', 'fine ' * 100)
`,
      archive,
    ]);
    const result = await fx.content.importArchive(createReadStream(archive));
    expect(Object.fromEntries(result.skippedReasons.map((r) => [r.reason, r.count]))).toEqual({
      parent_segment: 1,
      absolute_path: 1,
      backslash: 1,
      symlink: 1,
      through_link: 1,
      special_file: 1,
    });
    expect(sourcePaths(fx.content)).toEqual(['ok.txt']);
    expectConfined(fx);

    const bytes = readFileSync(archive);
    const at = bytes.indexOf(Buffer.from('ok.txt')) + 'ok.txt'.length + 3; // inside ok.txt's deflated data
    bytes[at] ^= 0x55;
    const error = await refusedWith(fx.content.importArchive([bytes], { replace: true }));
    expect(error.detail.reason).toBe('corrupt_archive');
    expect(sourcePaths(fx.content)).toEqual(['ok.txt']);
  });

  it('should refuse a zip bomb by ratio while inflating, and a zip of too many members before inflating any', async () => {
    const bomb = path.join(fx.scratch, 'bomb.zip');
    const crowd = path.join(fx.scratch, 'crowd.zip');
    execFileSync('python3', [
      '-c',
      `
import zipfile, sys
with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
    with z.open('zeros.bin', 'w', force_zip64=True) as f:
        chunk = bytes(1 << 20)
        for _ in range(200):
            f.write(chunk)
with zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_STORED) as z:
    for i in range(60000):
        z.writestr('f%d' % i, '')
`,
      bomb,
      crowd,
    ]);
    expect((await refusedWith(fx.content.importArchive(createReadStream(bomb)))).detail.reason).toBe('compression_ratio');
    expect((await refusedWith(fx.content.importArchive(createReadStream(crowd)))).detail).toMatchObject({ reason: 'too_many_entries' });
    expectConfined(fx);
  }, 60_000);
});
