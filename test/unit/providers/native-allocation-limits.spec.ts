/**
 * The parts of native resource limits a v1 host cannot show end to end: hierarchy detection from mountinfo (v1,
 * hybrid, pure v2), the v2 files and the join prefix on a stand-in hierarchy (a plain directory), and the rlimit
 * fallback's prefix run for real. The cgroup v1 path runs against a real server in
 * test/security/native-resource-limits.spec.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AllocationLimits, findHierarchy } from '../../../src/providers/native/allocation-limits.ts';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-limits-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const mountLine = (id: number, point: string, fstype: string, options: string) => `${id} 31 0:${id} / ${point} rw,relatime - ${fstype} ${fstype} ${options}`;

describe('findHierarchy', () => {
  it('should take the v1 mounts of memory, pids and cpu on a hybrid host (cpu co-mounted with cpuacct)', () => {
    const mountinfo = [
      mountLine(32, '/sys/fs/cgroup/cpu,cpuacct', 'cgroup', 'rw,cpu,cpuacct'),
      mountLine(35, '/sys/fs/cgroup/memory', 'cgroup', 'rw,memory'),
      mountLine(39, '/sys/fs/cgroup/pids', 'cgroup', 'rw,pids'),
      mountLine(40, '/sys/fs/cgroup/systemd', 'cgroup', 'rw,name=systemd'),
      mountLine(41, '/sys/fs/cgroup/unified', 'cgroup2', 'rw'),
    ].join('\n');
    expect(findHierarchy(mountinfo)).toEqual({
      version: 1,
      mounts: { cpu: '/sys/fs/cgroup/cpu,cpuacct', memory: '/sys/fs/cgroup/memory', pids: '/sys/fs/cgroup/pids' },
    });
  });

  it('should take a pure v2 mount for the controllers it has, and none whose v2 mount has no controllers', () => {
    writeFileSync(join(dir, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    expect(findHierarchy(mountLine(30, dir, 'cgroup2', 'rw,nsdelegate'))).toEqual({ version: 2, mounts: { memory: dir, pids: dir, cpu: dir } });
    writeFileSync(join(dir, 'cgroup.controllers'), '\n');
    expect(findHierarchy(mountLine(30, dir, 'cgroup2', 'rw'))).toBeUndefined();
  });
});

describe('AllocationLimits on a v2 hierarchy (a stand-in directory)', () => {
  it('should delegate the controllers, write memory.max, cpu.max and pids.max, and join the one group before the command', () => {
    const limits = new AllocationLimits('/var/lib/berth-a', { version: 2, mounts: { memory: dir, pids: dir, cpu: dir } });
    expect(limits.mode).toBe('cgroup-v2');
    limits.ensure('halloc_one', { memoryMb: 64, cpus: 0.5, pidsLimit: 32 });
    const [group] = limits.groupDirs('halloc_one');
    expect(limits.groupDirs('halloc_one')).toHaveLength(1);
    expect(readFileSync(join(group, 'memory.max'), 'utf8')).toBe(String(64 * 1024 * 1024));
    expect(readFileSync(join(group, 'cpu.max'), 'utf8')).toBe('50000 100000');
    expect(readFileSync(join(group, 'pids.max'), 'utf8')).toBe('32');
    expect(readFileSync(join(group, '..', 'cgroup.subtree_control'), 'utf8')).toMatch(/^\+/);

    const joined = spawnSync(limits.prefix('halloc_one', {})[0], [...limits.prefix('halloc_one', {}).slice(1), '/bin/echo', 'ran'], { encoding: 'utf8' });
    expect(joined.stdout).toBe('ran\n');
    expect(readFileSync(join(group, 'cgroup.procs'), 'utf8')).toBe(`${joined.pid}\n`);
  });

  it('should give runtimes on two data directories two parents, and refuse to run a command whose group is gone (125)', () => {
    const a = new AllocationLimits('/var/lib/berth-a', { version: 2, mounts: { memory: dir, pids: dir, cpu: dir } });
    const b = new AllocationLimits('/var/lib/berth-b', { version: 2, mounts: { memory: dir, pids: dir, cpu: dir } });
    expect(a.groupDirs('halloc_x')[0]).not.toBe(b.groupDirs('halloc_x')[0]);
    mkdirSync(join(dir, 'berth'), { recursive: true });
    const [file, ...args] = a.prefix('halloc_never_made', {});
    const refused = spawnSync(file, [...args, '/bin/echo', 'ran'], { encoding: 'utf8' });
    expect(refused).toMatchObject({ status: 125, stdout: '' });
    expect(refused.stderr).toMatch(/cannot join the control group/);
  });
});

describe('AllocationLimits fallback without a hierarchy', () => {
  it('should run the command under prlimit with RLIMIT_NPROC = pidsLimit and RLIMIT_DATA = memoryMb, and nothing for cpus', () => {
    const limits = new AllocationLimits(dir, 'none');
    expect(limits.mode).toBe('rlimit');
    limits.ensure('halloc_one', { memoryMb: 100, cpus: 1, pidsLimit: 77 }); // nothing to make
    expect(limits.groupDirs('halloc_one')).toEqual([]);
    const [file, ...args] = limits.prefix('halloc_one', { memoryMb: 100, cpus: 1, pidsLimit: 77 });
    const shown = spawnSync(file, [...args, '/bin/cat', '/proc/self/limits'], { encoding: 'utf8' }).stdout;
    expect(shown).toMatch(/^Max processes\s+77\s+77\s/m);
    expect(shown).toMatch(new RegExp(`^Max data size\\s+${100 * 1024 * 1024}\\s+${100 * 1024 * 1024}\\s`, 'm'));
    expect(limits.prefix('halloc_one', { cpus: 1 })).toEqual([]);
  });
});
