/** The bwrap argv: read-only host root entry by entry, private /tmp, hidden paths, mounts, cwd, network, privilege. */
import { describe, expect, it } from 'vitest';
import { bubblewrapArgv } from '../../../src/providers/native/bubblewrap.ts';

const pairs = (argv: string[], flag: string): string[][] =>
  argv.flatMap((a, i) => (a === flag ? [argv.slice(i + 1, i + (flag === '--tmpfs' || flag === '--remount-ro' ? 2 : 3))] : []));

/** Where the sandbox starts: the --chdir value, the last option before the command (and its pid 1) begins. */
const chdirOf = (argv: string[]): string => {
  const i = argv.indexOf('--chdir');
  expect(argv.indexOf('--')).toBe(i + 2);
  return argv[i + 1];
};

describe('bubblewrapArgv', () => {
  const argv = bubblewrapArgv('/usr/bin/bwrap', {
    chdir: '/tmp/ws',
    makeChdir: true,
    mounts: [{ source: '/data/versions/3', target: '/env/demo' }],
    network: 'none',
    hidden: ['/tmp'],
  });

  it('binds the host root read-only entry by entry and remounts the sandbox root read-only last', () => {
    expect(argv[0]).toBe('/usr/bin/bwrap');
    expect(pairs(argv, '--ro-bind')).toContainEqual(['/usr', '/usr']);
    expect(argv.indexOf('--remount-ro')).toBeGreaterThan(argv.indexOf('/env/demo'));
    expect(chdirOf(argv)).toBe('/tmp/ws');
  });

  it('never binds the cwd: it makes it in the private /tmp (after /tmp is made) and changes to it', () => {
    expect(pairs(argv, '--bind')).toEqual([]);
    expect(argv.indexOf('/tmp')).toBeLessThan(argv.indexOf('--dir'));
    expect(argv[argv.indexOf('--dir') + 1]).toBe('/tmp/ws');
  });

  it('shows mounts read-only', () => {
    expect(pairs(argv, '--ro-bind')).toContainEqual(['/data/versions/3', '/env/demo']);
    expect(pairs(argv, '--tmpfs')).toContainEqual(['/tmp']);
  });

  it('unshares the network only for network none, and always the pid namespace', () => {
    expect(argv).toContain('--unshare-net');
    expect(argv).toContain('--unshare-pid');
    expect(argv).toContain('--die-with-parent');
    const bridged = bubblewrapArgv('/usr/bin/bwrap', { network: 'bridge' });
    expect(bridged).not.toContain('--unshare-net');
    expect(bridged).not.toContain('--bind');
    expect(chdirOf(bridged)).toBe('/tmp');
  });
});

describe('bubblewrapArgv unprivileged', () => {
  it("puts its own pid 1 in front of the command, not bwrap's init, whose reaping the supervisor would wait for", () => {
    const argv = bubblewrapArgv('/usr/bin/bwrap', {});
    expect(argv).toContain('--as-pid-1');
    expect(argv.slice(argv.indexOf('--') + 1)).toEqual(['/bin/sh', '-c', '"$@"; exit $?', 'berth-init']);
  });

  it('runs in a user namespace with every capability dropped only when asked', () => {
    const argv = bubblewrapArgv('/usr/bin/bwrap', { unprivileged: true });
    expect(argv).toContain('--unshare-user');
    expect(argv[argv.indexOf('--cap-drop') + 1]).toBe('ALL');
    expect(bubblewrapArgv('/usr/bin/bwrap', {})).not.toContain('--unshare-user');
  });
});

describe('bubblewrapArgv for content versions', () => {
  it('keeps the host writable around a read-only version mount when asked (uncontained profiles)', () => {
    const argv = bubblewrapArgv('/usr/bin/bwrap', {
      hostWritable: true,
      mounts: [{ source: '/data/versions/3', target: '/env/demo' }],
      hidden: ['/tmp'],
      chdir: '/root',
    });
    expect(pairs(argv, '--bind')).toContainEqual(['/usr', '/usr']);
    expect(pairs(argv, '--bind')).toContainEqual(['/tmp', '/tmp']);
    expect(pairs(argv, '--ro-bind')).toContainEqual(['/data/versions/3', '/env/demo']);
    expect(pairs(argv, '--ro-bind')).not.toContainEqual(['/usr', '/usr']);
    expect(argv.indexOf('/env/demo')).toBeGreaterThan(argv.lastIndexOf('/usr'));
    expect(chdirOf(argv)).toBe('/root');
  });

  it('binds a build directory writable at its session path before the root goes read-only', () => {
    const argv = bubblewrapArgv('/usr/bin/bwrap', { binds: [{ source: '/data/versions/4', target: '/env/demo' }], chdir: '/env/demo' });
    expect(pairs(argv, '--bind')).toEqual([['/data/versions/4', '/env/demo']]);
    expect(argv.indexOf('--remount-ro')).toBeGreaterThan(argv.indexOf('/env/demo'));
    expect(chdirOf(argv)).toBe('/env/demo');
  });
});
