/**
 * `sandbox.setTimeout(ms)` and `sandboxes.create({timeoutMs})` (issue 18) against a real `berth serve`: the deadline is
 * the server's (a `lease.deadline_set` event in the lease's stream), so the sandbox is killed — its lease released, its
 * machine and private environment removed — with no client running and across a server restart (SIGKILL); a later
 * call moves it; another tenant cannot touch it; a bad timeout is a typed 400.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Berth } from '../../src/client/index.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;

// A short maintenance period: the loop that releases due leases runs every 200 ms.
beforeAll(async () => {
  server = await startServer([], { BERTH_MAINTENANCE_MS: '200' });
});
afterAll(() => server?.close());

const connect = (token = tokens.alice) => Berth.connect({ url: server.url, token });
const leaseOf = (name: string) => server.json(`/v1/leases/${name}`, { token: tokens.alice });

describe('sandbox timeouts', () => {
  it('should kill the sandbox at its deadline with no client left, after a server restart in between', async () => {
    const berth = await connect();
    const sandbox = await berth.sandboxes.create({ name: 'timed', timeoutMs: 60_000 });
    const created = await sandbox.info();
    expect(created.deadline).toBeGreaterThan(Date.now() + 50_000);
    expect((await sandbox.run('echo alive')).stdout).toBe('alive\n');
    const environmentId = created.environmentId!;

    const moved = await sandbox.setTimeout(2_000);
    expect(moved.deadline).toBeLessThan(created.deadline!);
    // The server dies before the deadline and is down when it passes: only the recorded deadline can act on it.
    await server.stop('SIGKILL');
    await sleep(Math.max(0, moved.deadline! + 300 - Date.now()));
    await server.restart('SIGKILL');
    const released = await waitFor(() => leaseOf('timed'), { what: 'the lease released at its deadline', timeoutMs: 30_000, intervalMs: 200, until: (l) => l.state === 'released' });
    expect(Date.now()).toBeGreaterThanOrEqual(moved.deadline!);
    expect(released.deadline).toBe(moved.deadline);
    expect((await server.call(`/v1/environments/${environmentId}`, { token: tokens.alice })).status).toBe(404);
    // A kill by name still cleans what the server left: the sandbox's turn and its own workspace.
    const again = await connect();
    await again.sandboxes.kill('timed');
    expect((await again.sandboxes.list()).map((s) => s.name)).not.toContain('timed');
    await expect(again.workspaces.get(sandbox.workspaceId)).rejects.toThrow(/deleted/);
  });

  it('should keep a sandbox whose deadline was moved on, and clear the deadline with null', async () => {
    const berth = await connect();
    const sandbox = await berth.sandboxes.create({ name: 'extended', timeoutMs: 1_500 });
    await sandbox.setTimeout(120_000);
    await sleep(3_000);
    expect((await sandbox.run('echo still')).stdout).toBe('still\n');
    expect((await sandbox.setTimeout(null)).deadline).toBeNull();
    await sandbox.kill();
  });

  it("should answer another tenant not_found for a sandbox's timeout, and a bad timeout with a typed 400", async () => {
    const berth = await connect();
    const sandbox = await berth.sandboxes.create({ name: 'guarded' });
    const bob = await connect(tokens.bob);
    await expect(bob.leases.setTimeout('guarded', 0)).rejects.toMatchObject({ status: 404, code: 'not_found' });
    for (const timeoutMs of [-1, 1.5, 1e12, 'soon']) {
      const answer = await server.call('/v1/leases/guarded/timeout', { method: 'POST', body: { timeoutMs }, token: tokens.alice });
      expect(answer.status).toBe(400);
      expect((await answer.json()).error.code).toBe('invalid_request');
    }
    expect((await sandbox.info()).deadline).toBeNull();
    await sandbox.kill();
  });
});
