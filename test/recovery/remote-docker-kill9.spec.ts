/**
 * kill -9 of an Execution Host while a command runs in a container on its Docker engine: the container and the
 * command's supervisor do not depend on the host process, so the command finishes meanwhile; the control plane keeps
 * the execution `running` (never exited by guess, never resubmitted: the command counts its starts in its HOME, a
 * tmpfs of the container), and once the host is back it reads the receipt from the spool volume and the execution
 * converges to its real exit with its whole output. The same when the control plane is killed too meanwhile.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finished, running, submit, type BerthServer } from '../e2e/berth-server.ts';
import { remoteDockerBed } from '../fixtures/remote-execution.ts';
import type { TestHosts } from '../fixtures/remote-hosts.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { dockerAvailable } from '../integration/docker-env.ts';

let hosts: TestHosts;
let server: BerthServer;
let environment: string;

beforeAll(async () => {
  if (!dockerAvailable) return;
  ({ hosts, server, environment } = await remoteDockerBed({ BERTH_MAINTENANCE_MS: '200' }));
}, 180_000);

afterAll(async () => {
  await server?.close();
  await hosts?.close();
});

const output = async (id: string) => (await server.call(`/v1/executions/${id}/output?stream=stdout`)).text();
const whole = `first\n${Array.from({ length: 20000 }, (_, i) => i + 1).join('\n')}\n`;
/** How long the command waits after its first line: the host is killed within it, and stays down past it. */
const WAIT_S = 3;

/** A command that records its start under `name` in HOME, writes, waits WAIT_S, writes again and exits 5. */
async function startWaiting(name: string) {
  const script = `echo start >> "$HOME/${name}.starts"; echo first; sleep ${WAIT_S}; seq 1 20000; exit 5`;
  const record = await submit(server, environment, ['/bin/sh', '-c', script]);
  await running(server, record.id);
  await waitFor(() => output(record.id), { what: 'the first line', until: (t) => t === 'first\n', timeoutMs: 20_000 });
  return record;
}

/** The starts the command recorded, read by another command in the same container. */
async function starts(name: string): Promise<string> {
  const record = await submit(server, environment, ['/bin/sh', '-c', `cat "$HOME/${name}.starts"`]);
  expect(await finished(server, record.id)).toMatchObject({ status: 'exited', exitCode: 0 });
  return output(record.id);
}

describe.skipIf(!dockerAvailable)('kill -9 of a remote host while its container runs a command', () => {
  it('keeps the execution running while the host is gone, then converges with the whole output, started once', async () => {
    const record = await startWaiting('host-only');
    await hosts.hosts['host-unix']!.stop('SIGKILL');
    // The command finishes while its host is down: only the spool volume knows.
    await sleep(WAIT_S * 1000 + 1500);
    expect((await server.json(`/v1/executions/${record.id}`)).status).toBe('running');
    expect((await server.json(`/v1/environments/${environment}`)).availability).toBe('unavailable');
    await hosts.hosts['host-unix']!.restart();
    expect(await finished(server, record.id)).toMatchObject({ status: 'exited', exitCode: 5 });
    expect(await output(record.id)).toBe(whole);
    expect(await starts('host-only')).toBe('start\n');
  });

  it('converges the same when the control plane is killed too while the host is down', async () => {
    const record = await startWaiting('both');
    await hosts.hosts['host-unix']!.stop('SIGKILL');
    await server.restart('SIGKILL');
    await sleep(WAIT_S * 1000 + 1500);
    expect((await server.json(`/v1/executions/${record.id}`)).status).toBe('running');
    await hosts.hosts['host-unix']!.restart();
    expect(await finished(server, record.id)).toMatchObject({ status: 'exited', exitCode: 5 });
    expect(await output(record.id)).toBe(whole);
    expect(await starts('both')).toBe('start\n');
  });
});
