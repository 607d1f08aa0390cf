/**
 * The directories that get a subdirectory per command (a native allocation's spool, the launcher's spares, a Docker
 * spool volume's ops) are marked as tops of directory hierarchies on ext4 (`chattr +T`), so the kernel spreads those
 * subdirectories over its block groups: on ext4 without a journal each create otherwise pays for every inode of the
 * group removed in the minutes before (spread-dirs.ts). Read back with e2fsprogs' lsattr, on real directories.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, constants, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import { superviseRun } from '../../src/providers/native/supervisor-launcher.ts';
import { prepareSpool } from '../../src/providers/docker/spool-volume.ts';
import { spreadSubdirectories } from '../../src/providers/spread-dirs.ts';
import { dockerAvailable, newTestRun, rawDocker, removeTestResources } from './docker-env.ts';
import { waitFor } from '../fixtures/wait-for.ts';

const EXT4 = 0xef53;
const root = mkdtempSync(join(tmpdir(), 'berth-spread-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const onExt4 = statfsSync(root).type === EXT4;
if (!onExt4) console.log(`skipped: spread-dirs specs need ${tmpdir()} on ext4 (the only filesystem with the flag)`);

/** The attribute letters lsattr prints for the directory itself. */
const attributes = (dir: string): string => {
  const out = spawnSync('lsattr', ['-d', dir], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`lsattr failed: ${out.stderr}`);
  return out.stdout.split(' ')[0];
};

describe.skipIf(!onExt4)('spreading per-command directories over block groups', () => {
  it('marks a directory given by path or descriptor, and leaves the flags it had', () => {
    const plain = join(root, 'plain');
    mkdirSync(plain);
    expect(attributes(plain)).not.toContain('T');
    spawnSync('chattr', ['+A', plain]);
    spreadSubdirectories(plain);
    expect(attributes(plain)).toContain('T');
    expect(attributes(plain)).toContain('A');
    spreadSubdirectories(plain); // already marked: unchanged
    expect(attributes(plain)).toContain('T');

    const byDescriptor = join(root, 'by-descriptor');
    mkdirSync(byDescriptor);
    const fd = openSync(byDescriptor, constants.O_RDONLY | constants.O_DIRECTORY);
    spreadSubdirectories(fd);
    closeSync(fd);
    expect(attributes(byDescriptor)).toContain('T');
  });

  it('does not pass the mark to the subdirectories themselves (each keeps its files beside it)', () => {
    const top = join(root, 'top');
    mkdirSync(top);
    spreadSubdirectories(top);
    mkdirSync(join(top, 'op'));
    expect(attributes(join(top, 'op'))).not.toContain('T');
  });

  it("marks a native allocation's spool directory when it is made", async () => {
    const dataDir = join(root, 'data');
    const provider = new NativeProvider({ dataDir });
    await provider.allocate({ environmentId: 'env-1', allocationId: 'alloc-1', requestId: 'req-1', generation: 1, profile: { provider: 'native' } });
    expect(attributes(join(dataDir, 'spool', 'alloc-1'))).toContain('T');
    expect(attributes(join(dataDir, 'spool'))).not.toContain('T');
  });

  it("marks the launcher's spares directory", async () => {
    const op = join(root, 'op-spare');
    mkdirSync(op);
    expect(await superviseRun({ dir: op, cwd: '/', graceMs: 100, stdin: false, argv: ['/bin/true'] }, { PATH: '/usr/bin:/bin' }).exited).toEqual({ code: 0 });
    const spareRoots = () => readdirSync(tmpdir()).filter((n) => n.startsWith(`berth-spares-${process.pid}-`));
    const [spares] = await waitFor(spareRoots, { until: (r) => r.length > 0, what: 'the spares directory' });
    expect(attributes(join(tmpdir(), spares!))).toContain('T');
  });
});

const onHost = dockerAvailable && process.getuid?.() === 0;
describe.skipIf(!onExt4 || !onHost)("a Docker spool volume laid out on the host", () => {
  const run = newTestRun();
  afterAll(() => removeTestResources(run));

  it('has its ops directory marked', async (ctx) => {
    const volume = `berth-spread-${run['berth.test-run']}`;
    await rawDocker.createVolume({ Name: volume, Labels: run });
    const { Mountpoint } = await rawDocker.getVolume(volume).inspect();
    if (statfsSync(Mountpoint).type !== EXT4) ctx.skip('the engine keeps its volumes off ext4');
    // Laid out on the host, the container is never asked for.
    await prepareSpool(rawDocker, rawDocker.getContainer('never-used'), volume);
    expect(attributes(join(Mountpoint, 'ops'))).toContain('T');
  });
});
