/**
 * kill -9 of an Execution Host while its command runs: the control plane keeps the execution `running` (never exited
 * by guess, never resubmitted: the command counts its starts in a file), and once the host is back the execution
 * converges to its real exit with its whole output; the environment reads `unavailable` while its host is gone.
 * The same when the control plane is killed too meanwhile.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { startHosts, type TestHosts } from '../fixtures/remote-hosts.ts';
import { waitFor } from '../fixtures/wait-for.ts';

let hosts: TestHosts;
let server: BerthServer;
let environment: string;

beforeAll(async () => {
  hosts = await startHosts(['unix']);
  server = await startServer([], { BERTH_REMOTE_HOSTS: hosts.hostsFile, BERTH_DOCKER: '0', BERTH_MAINTENANCE_MS: '200' });
  // The admin's: uncontained on the host, so the command sees the test's files (a member's runs in a sandbox).
  environment = await createEnvironment(server, tokens.admin, { provider: 'remote', host: 'host-unix' });
}, 180_000);

afterAll(async () => {
  await server?.close();
  await hosts?.close();
});

const admin = { token: tokens.admin };
const output = async (id: string) => (await server.call(`/v1/executions/${id}/output?stream=stdout`, admin)).text();

/** A command that records each start, writes, waits for `gate` to exist, writes again and exits 5. */
async function startGated(name: string) {
  const starts = join(hosts.root, `${name}.starts`);
  const gate = join(hosts.root, `${name}.gate`);
  const script = `echo start >> ${starts}; echo first; while [ ! -e ${gate} ]; do sleep 0.05; done; seq 1 20000; exit 5`;
  const record = await submit(server, environment, ['/bin/sh', '-c', script], {}, tokens.admin);
  await running(server, record.id, tokens.admin);
  await waitFor(() => output(record.id), { what: 'the first line', until: (t) => t === 'first\n', timeoutMs: 20_000 });
  return { record, starts, gate };
}

const whole = `first\n${Array.from({ length: 20000 }, (_, i) => i + 1).join('\n')}\n`;

describe('kill -9 of a remote host', () => {
  it('keeps the execution running while the host is gone, then converges with the whole output, started once', async () => {
    const { record, starts, gate } = await startGated('host-only');
    await hosts.hosts['host-unix']!.stop('SIGKILL');
    // The command finishes while its host is down: only the host's spool knows.
    writeFileSync(gate, '');
    await sleep(1500);
    const meanwhile = await server.json(`/v1/executions/${record.id}`, admin);
    expect(meanwhile.status).toBe('running');
    expect((await server.json(`/v1/environments/${environment}`, admin)).availability).toBe('unavailable');
    await hosts.hosts['host-unix']!.restart();
    expect((await server.json(`/v1/environments/${environment}`, admin)).availability).toBe('available');
    const done = await finished(server, record.id, tokens.admin);
    expect(done).toMatchObject({ status: 'exited', exitCode: 5 });
    expect(await output(record.id)).toBe(whole);
    expect(readFileSync(starts, 'utf8')).toBe('start\n');
  });

  it('converges the same when the control plane is killed too while the host is down', async () => {
    const { record, starts, gate } = await startGated('both');
    await hosts.hosts['host-unix']!.stop('SIGKILL');
    await server.restart('SIGKILL');
    writeFileSync(gate, '');
    await sleep(1500);
    expect((await server.json(`/v1/executions/${record.id}`, admin)).status).toBe('running');
    await hosts.hosts['host-unix']!.restart();
    const done = await finished(server, record.id, tokens.admin);
    expect(done).toMatchObject({ status: 'exited', exitCode: 5 });
    expect(await output(record.id)).toBe(whole);
    expect(readFileSync(starts, 'utf8')).toBe('start\n');
  });
});
