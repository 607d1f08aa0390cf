/**
 * `berth env create|ls|show|acquire|release|rm` as a user runs them: the real command, one process per step, against one
 * data directory (each step starts the runtime, recovers, acts and stops). Native always; Docker when an engine
 * answers.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL } from '../../src/providers/docker/labels.ts';
import { berth, cleanEnv } from './cli-process.ts';
import { dockerAvailable, dockerEndpoint, rawDocker } from './docker-env.ts';
import { countLabelled } from './environments-berth.ts';

let dir: string;
const dockerHost = 'socketPath' in dockerEndpoint ? `unix://${dockerEndpoint.socketPath}` : (process.env.DOCKER_HOST ?? '');
const env = (docker: boolean) => cleanEnv(docker ? { DOCKER_HOST: dockerHost } : { BERTH_DOCKER: '0' });

async function envCli(args: string[], docker = false) {
  const done = await berth(['env', ...args, '--data-dir', dir], env(docker));
  return { ...done, json: () => done.stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-env-cli-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('berth env', () => {
  it('should create, list, acquire, release, and remove a native environment (releasing an idle allocation on the way)', async () => {
    const created = await envCli(['create', 'Build Host', '--idle-seconds', '30', '--json']);
    expect(created.code, created.stderr).toBe(0);
    const [environment] = created.json();
    expect(environment).toMatchObject({ slug: 'build-host', profile: { provider: 'native', idleSeconds: 30 }, state: 'idle' });

    const listed = await envCli(['ls', '--json']);
    expect(listed.json().map((e: { id: string }) => e.id)).toEqual([environment.id]);

    const acquired = await envCli(['acquire', 'build-host', '--json']);
    expect(acquired.code, acquired.stderr).toBe(0);
    const [allocation] = acquired.json();
    expect(allocation).toMatchObject({ environmentId: environment.id, state: 'ready', ownership: 'borrowed', generation: 1 });

    // A second process finds the same allocation (recovery inspected it; nothing new was requested).
    expect((await envCli(['acquire', environment.id, '--json'])).json()[0].allocationId).toBe(allocation.allocationId);

    const released = await envCli(['release', 'build-host', '--json']);
    expect(released.json()[0]).toMatchObject({ allocationId: allocation.allocationId, state: 'released' });
    const again = await envCli(['acquire', 'build-host', '--json']);
    expect(again.json()[0]).toMatchObject({ state: 'ready', generation: 2 });

    // seed 001 §DELETE: an idle allocation is released as part of the delete, then the environment is gone.
    const removed = await envCli(['rm', 'Build Host']);
    expect(removed.code, removed.stderr).toBe(0);
    expect((await envCli(['ls', '--json'])).stdout.trim()).toBe('');
    expect((await envCli(['show', environment.id])).stderr).toMatch(/^berth: No such environment\./);
  });

  it('should reject bad command lines and unknown environments', async () => {
    expect((await envCli(['create', 'x', '--memory-mb', 'lots'])).code).toBe(2);
    expect((await envCli(['launch'])).code).toBe(2);
    const missing = await envCli(['acquire', 'no-such-env']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/No environment is named "no-such-env"/);
    // A flag another subcommand or the other mode takes is a mistake here, not ignored.
    expect((await envCli(['ls', '--follow'])).code).toBe(2);
    const token = await envCli(['ls', '--token', 'secret']);
    expect(token.code).toBe(2);
    expect(token.stderr).toMatch(/--token is for a server/);
  });

  it.skipIf(!dockerAvailable)('should allocate and release a Docker environment', async () => {
    const [environment] = (await envCli(['create', 'cli box', '--provider', 'docker', '--pids-limit', '64', '--json'], true)).json();
    try {
      const acquired = await envCli(['acquire', 'cli-box', '--json'], true);
      expect(acquired.code, acquired.stderr).toBe(0);
      const [allocation] = acquired.json();
      expect(allocation).toMatchObject({ provider: 'docker', ownership: 'managed', state: 'ready' });
      expect((await rawDocker.getContainer(allocation.identity.resourceId).inspect()).HostConfig.PidsLimit).toBe(64);
      expect((await envCli(['release', 'cli-box', '--json'], true)).json()[0].state).toBe('released');
      expect(await countLabelled(LABEL.environmentId, environment.id)).toEqual({ containers: 0, networks: 0, volumes: 0 });
    } finally {
      // What this test's environment left, if it failed half-way (its id is unique to this run).
      for (const c of await rawDocker.listContainers({ all: true, filters: { label: [`${LABEL.environmentId}=${environment.id}`] } })) {
        await rawDocker.getContainer(c.Id).remove({ force: true });
      }
    }
  });
});
