/**
 * Resource limits of contained native commands (issue 10: a member "must not take the server down for others"),
 * against a real `berth serve` as root with member tokens: a fork bomb stays under the profile's pidsLimit while the
 * server and an admin's command carry on, a memory hog is killed by the OOM killer at memoryMb, executions of one
 * allocation share one set of limits (as execs of one container do) and two allocations do not, and the group goes
 * with its allocation. Processes are counted by the sandbox's pid namespace, from the host, not by the cgroup.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AllocationLimits } from '../../src/providers/native/allocation-limits.ts';
import { SPARE_PID_ONE } from '../../src/providers/native/launcher-lines.ts';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { build, putFile } from '../e2e/content-client.ts';

let server: BerthServer;
/** The server's view of this host's limits, read for its data directory: where its groups are. */
let limits: AllocationLimits;

beforeAll(async () => {
  server = await startServer();
  limits = new AllocationLimits(server.dataDir);
}, 60_000);

/** Executions of this file, cancelled at the end should an assertion have left one running. */
const started: { id: string; token: string }[] = [];
afterAll(async () => {
  for (const { id, token } of started) await server.call(`/v1/executions/${id}/cancel`, { method: 'POST', token }).catch(() => undefined);
  await server?.close();
});

async function run(environment: string, command: string, token = tokens.alice) {
  const execution = await submit(server, environment, ['/bin/sh', '-c', command], {}, token);
  started.push({ id: execution.id, token });
  return execution;
}

/** How this host bounds native commands (a root process is needed to make groups). */
const mode = new AllocationLimits(tmpdir()).mode;
const cgroups = mode === 'cgroup-v1' || mode === 'cgroup-v2';

/** Every process in the pid namespace of the sandbox whose argv carries `marker` (its pid 1 carries the command). */
function sandboxProcessCount(marker: string): number {
  const host = readlinkSync('/proc/self/ns/pid');
  const pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  const nsOf = (pid: string): string | undefined => {
    try {
      return readlinkSync(`/proc/${pid}/ns/pid`);
    } catch {
      return undefined; // gone meanwhile
    }
  };
  const namespaces = new Set<string>();
  for (const pid of pids) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(marker)) continue;
    } catch {
      continue;
    }
    const ns = nsOf(pid);
    if (ns && ns !== host) namespaces.add(ns);
  }
  if (namespaces.size === 0) return 0;
  return pids.filter((pid) => namespaces.has(nsOf(pid) ?? '')).length;
}

async function stdoutOf(id: string, token = tokens.alice): Promise<string> {
  return (await server.call(`/v1/executions/${id}/output?stream=stdout&cursor=0`, { token })).text();
}

/** Waits for the last stdout line of a running execution to read `line`. */
async function printed(id: string, line: string, token = tokens.alice): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await stdoutOf(id, token)).split('\n').includes(line)) {
    if (Date.now() > deadline) throw new Error(`execution ${id} never printed ${line}: ${await stdoutOf(id, token)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const allocationOf = async (environment: string, token = tokens.alice): Promise<string> =>
  (await server.json(`/v1/environments/${environment}`, { token })).allocation.allocationId;

/** `sleep 30 &` up to `n` times, printing the count after each start; a failed fork ends the shell (dash). */
const startSleepers = (n: number, then: string) => `i=0; while [ $i -lt ${n} ]; do sleep 30 & i=$((i+1)); echo $i; done; ${then}`;

describe.skipIf(!cgroups)(`native resource limits (${mode}): a contained command is bounded by its profile`, () => {
  it('should hold a fork bomb to pidsLimit while /healthz answers within 1 s and an admin command runs, and cancel should end it', async () => {
    const bombEnv = await createEnvironment(server, tokens.alice, { pidsLimit: 64, cpus: 1 });
    const adminEnv = await createEnvironment(server, tokens.admin, { contain: false });
    const marker = `bomb-${process.pid}-${Date.now()}`;
    // Each shell forks a background pipeline of two more, 9 levels deep (512 sleeping leaves), and awk keeps forking
    // sleepers (it carries on past a failed fork, where a shell gives up): far past 64 when nothing bounds them, and
    // still finite should this ever run unbounded on a shared CI machine.
    // (srand() answers the time of its previous call: the filler keeps trying for 20 s at most.)
    const filler = `BEGIN { for (i = 0; i < 2000; i++) system("sleep 8 2>/dev/null &"); srand(); t0 = srand(); while (srand() - t0 < 20) system("sleep 1 2>/dev/null") }`;
    const bomb = `: ${marker}; b() { if [ $1 -lt 9 ]; then b $(($1+1)) | b $(($1+1)) & else sleep 8; fi; }; b 0 2>/dev/null & exec awk '${filler}'`;
    const execution = await run(bombEnv, bomb);
    await running(server, execution.id);

    let most = 0;
    let slowestHealthMs = 0;
    const admin = finished(server, (await submit(server, adminEnv, ['/bin/sh', '-c', 'echo still here'], {}, tokens.admin)).id, tokens.admin);
    const until = Date.now() + 3000;
    while (Date.now() < until) {
      most = Math.max(most, sandboxProcessCount(marker));
      const asked = performance.now();
      const health = await server.call('/healthz', { token: null });
      slowestHealthMs = Math.max(slowestHealthMs, performance.now() - asked);
      expect(health.status).toBe(200);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(most).toBeGreaterThan(48); // it did fork up to the limit...
    expect(most).toBeLessThanOrEqual(64); // ...and never past it
    expect(slowestHealthMs).toBeLessThan(1000);
    expect(await admin).toMatchObject({ status: 'exited', exitCode: 0 });

    await server.json(`/v1/executions/${execution.id}/cancel`, { method: 'POST' });
    expect((await finished(server, execution.id)).status).toBe('cancelled');
    expect(sandboxProcessCount(marker)).toBe(0);
    // Nothing of the bomb is left in the allocation's groups. What may be there is the spare sandbox made for the
    // allocation's next command (its bubblewrap and pid-1 shell waiting for a request, native-executor.ts).
    const spareScript = SPARE_PID_ONE[2]!;
    for (const dir of limits.groupDirs(await allocationOf(bombEnv))) {
      const left = readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
      const notSpare = left.filter((pid) => {
        try {
          return !readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(spareScript);
        } catch {
          return false; // gone meanwhile
        }
      });
      expect(notSpare).toEqual([]);
      expect(left.length).toBeLessThanOrEqual(2);
    }
  }, 30_000);

  it('should have a memory hog killed by the OOM killer at memoryMb, the server\'s memory untouched', async () => {
    const env = await createEnvironment(server, tokens.alice, { memoryMb: 64 });
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.process.child.pid}/status`, 'utf8'))![1]) * 1024;
    const before = rss();
    // A string doubled 27 times: 128 MiB, twice that while it is copied.
    const hog = 'x=x; i=0; while [ $i -lt 27 ]; do x=$x$x; i=$((i+1)); done; echo ${#x}';
    const record = await finished(server, (await run(env, hog)).id);
    expect(record.status).toBe('exited');
    // SIGKILL: the command's status through the sandbox's pid 1 (128 + 9), or the signal itself.
    expect(record.exitCode === 137 || record.signal === 'SIGKILL', JSON.stringify(record)).toBe(true);
    expect(await stdoutOf(record.id)).toBe('');
    const [memoryGroup] = limits.groupDirs(await allocationOf(env));
    const events = readFileSync(join(memoryGroup, limits.mode === 'cgroup-v1' ? 'memory.oom_control' : 'memory.events'), 'utf8');
    expect(Number(/oom_kill (\d+)/.exec(events)![1])).toBeGreaterThanOrEqual(1);
    expect(rss() - before).toBeLessThan(64 * 1024 * 1024);
  }, 30_000);

  it('should share pidsLimit between two executions of one allocation, and not between two allocations', async () => {
    const shared = await createEnvironment(server, tokens.bob, { pidsLimit: 64 });
    const other = await createEnvironment(server, tokens.bob, { pidsLimit: 64 });
    const holder = await run(shared, startSleepers(30, 'exec sleep 30'), tokens.bob);
    await printed(holder.id, '30', tokens.bob);

    // 40 more in the same allocation cannot all start: the 30 above and each sandbox's own processes count too.
    const second = await finished(server, (await run(shared, startSleepers(40, 'exit 0'), tokens.bob)).id, tokens.bob);
    const startedBeside = Number((await stdoutOf(second.id, tokens.bob)).trim().split('\n').at(-1) ?? 0);
    expect(second.exitCode, 'a fork past the limit fails').not.toBe(0);
    expect(startedBeside).toBeLessThan(34);

    // Another allocation has limits of its own: its 40 all start while the 30 still hold theirs.
    const third = await finished(server, (await run(other, startSleepers(40, 'exit 0'), tokens.bob)).id, tokens.bob);
    expect(third).toMatchObject({ status: 'exited', exitCode: 0 });
    expect((await stdoutOf(third.id, tokens.bob)).trim().split('\n').at(-1)).toBe('40');

    await server.json(`/v1/executions/${holder.id}/cancel`, { method: 'POST', token: tokens.bob });
    await finished(server, holder.id, tokens.bob);
  }, 40_000);

  it('should remove the group when the allocation is released (as an environment must be before it is deleted), and make none for the admin\'s host', async () => {
    const gone = async (dirs: string[]) => {
      const deadline = Date.now() + 10_000;
      while (dirs.some((d) => existsSync(d)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      return dirs.filter((d) => existsSync(d));
    };
    const released = await createEnvironment(server, tokens.alice, { pidsLimit: 64 });
    await finished(server, (await submit(server, released, ['true'])).id);
    const allocation = await allocationOf(released);
    const releasedDirs = limits.groupDirs(allocation);
    expect(releasedDirs.length).toBeGreaterThan(0);
    for (const dir of releasedDirs) expect(existsSync(dir), dir).toBe(true);
    const release = await server.call(`/v1/environments/${released}/allocations/${allocation}`, { method: 'DELETE' });
    expect(release.status).toBe(200);
    expect(await gone(releasedDirs)).toEqual([]);
    expect((await server.call(`/v1/environments/${released}`, { method: 'DELETE' })).status).toBe(204);

    const host = await createEnvironment(server, tokens.admin, { contain: false, pidsLimit: 64 });
    await finished(server, (await submit(server, host, ['true'], {}, tokens.admin)).id, tokens.admin);
    for (const dir of limits.groupDirs(await allocationOf(host, tokens.admin))) expect(existsSync(dir), dir).toBe(false);
  }, 30_000);

  it('should run a native build in a group of its own with the environment\'s limits, removed after the build', async () => {
    const env = await createEnvironment(server, tokens.alice, { pidsLimit: 64 });
    // Its own group as /proc shows it (v1: the pids line; v2: the one line), and that group's pids.max.
    const setup = [
      'cat /proc/self/cgroup',
      'v1=$(sed -n "s/^[0-9]*:pids://p" /proc/self/cgroup)',
      'if [ -n "$v1" ]; then cat /sys/fs/cgroup/pids$v1/pids.max; else cat /sys/fs/cgroup$(sed -n "s/^0:://p" /proc/self/cgroup)/pids.max; fi',
    ];
    await putFile(server, env, 'setup.sh', `${setup.join('\n')}\n`);
    const record = await build(server, env);
    expect(record, record.log).toMatchObject({ status: 'ready' });
    const group = (limits.mode === 'cgroup-v1' ? /\d+:pids:(\/berth\/[0-9a-f]+\/build-\S+)/ : /0::(\/berth\/[0-9a-f]+\/build-\S+)/).exec(record.log)?.[1];
    expect(group, record.log).toBeDefined();
    expect(record.log).toMatch(/^64$/m);
    expect(existsSync(join(limits.mode === 'cgroup-v1' ? '/sys/fs/cgroup/pids' : '/sys/fs/cgroup', group!))).toBe(false);
  }, 60_000);
});
