/**
 * The Docker hardening checks of an allocation's container (DESIGN §6), shared by the provider's spec and the warm
 * pools' (a pooled container must be as locked down as a cold one): the engine's view of it, then what a command
 * inside can do.
 */
import type Docker from 'dockerode';
import { expect } from 'vitest';
import { execIn } from './docker-env.ts';

export interface ExpectedLimits {
  memoryMb: number;
  pidsLimit: number;
  /** Undefined: no CPU limit. */
  cpus?: number;
}

export function expectHardened(info: Docker.ContainerInspectInfo, limits: ExpectedLimits): void {
  expect(info.State.Running).toBe(true);
  expect(info.Config.User).toBe('1000:1000');
  expect(info.HostConfig.ReadonlyRootfs).toBe(true);
  expect(info.HostConfig.CapDrop).toEqual(['ALL']);
  expect(info.HostConfig.SecurityOpt).toContain('no-new-privileges');
  expect(info.HostConfig.PidsLimit).toBe(limits.pidsLimit);
  expect(info.HostConfig.Memory).toBe(limits.memoryMb * 1024 * 1024);
  expect(info.HostConfig.NanoCpus ?? 0).toBe(limits.cpus === undefined ? 0 : limits.cpus * 1e9);
  expect(info.HostConfig.Init).toBe(true);
  expect(info.HostConfig.Tmpfs).toEqual({
    '/tmp': expect.stringContaining('size=64m'),
    '/home/berth': 'rw,exec,nosuid,nodev,size=512m,mode=0700,uid=1000,gid=1000',
  });
  expect(info.Config.Env).toContain('HOME=/home/berth');
}

/** Inside: commands run as 1000, the spool is writable, the root is not, PID 1 is the engine's reaping init. */
export async function expectContainedCommands(containerId: string): Promise<void> {
  const probe = await execIn(
    containerId,
    ['/bin/sh', '-c', 'id -u; touch /berth/spool/ops/probe && echo spool-writable; touch /probe 2>/dev/null || echo root-readonly; cat /proc/1/cmdline | tr "\\0" " "'],
  );
  expect(probe.exitCode).toBe(0);
  expect(probe.output).toMatch(/^1000\r?$/m);
  expect(probe.output).toContain('spool-writable');
  expect(probe.output).toContain('root-readonly');
  expect(probe.output).toContain('docker-init');
}
