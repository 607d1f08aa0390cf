/**
 * The directories that get a subdirectory per command (every spool root, as the Spool opens it: a native
 * allocation's, a Docker spool volume's ops reached from the host; and the launcher's spares) are marked as tops of
 * directory hierarchies on ext4 (`chattr +T`), so the kernel spreads those subdirectories over its block groups: on
 * ext4 without a journal each create otherwise pays for every inode of the group removed in the minutes before
 * (spread-dirs.ts). Read back with e2fsprogs' lsattr, on real directories.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, constants, mkdirSync, mkdtempSync, openSync, readdirSync, rmSync, statfsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { commandEnv } from '../../src/providers/command-env.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import { superviseRun } from '../../src/providers/native/supervisor-launcher.ts';
import { spreadSubdirectories } from '../../src/providers/spread-dirs.ts';
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

  it("marks a native allocation's spool directory when its first command runs, one an older Berth made too", async () => {
    const dataDir = join(root, 'data');
    mkdirSync(join(dataDir, 'spool', 'alloc-1'), { recursive: true }); // made unmarked, as before this change
    const provider = new NativeProvider({ dataDir });
    const intent = { environmentId: 'env-1', allocationId: 'alloc-1', requestId: 'req-1', generation: 1, profile: { provider: 'native' as const } };
    await provider.allocate(intent);
    const executor = provider.executor(intent, intent.profile);
    try {
      let receipt = await executor.submit({ operationId: 'op-1', command: ['true'], env: commandEnv(), stdin: false });
      while (receipt.state === 'running') {
        await executor.waitForChange('op-1', 1_000, {});
        receipt = await executor.status('op-1');
      }
      expect(receipt).toMatchObject({ state: 'exited', exitCode: 0 });
      expect(attributes(join(dataDir, 'spool', 'alloc-1'))).toContain('T');
      expect(attributes(join(dataDir, 'spool', 'alloc-1', 'op-1'))).not.toContain('T');
      expect(attributes(join(dataDir, 'spool'))).not.toContain('T');
    } finally {
      await provider.close();
    }
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

