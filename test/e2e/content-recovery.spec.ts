/**
 * A build under way when `berth serve` is killed (SIGKILL) is failed by the next start ("interrupted by a runtime
 * restart") and its version directory removed; it is never run again, and the environment builds anew afterwards.
 */
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type BerthServer } from './berth-server.ts';
import { build, createNamed, putFile, run, waitBuild } from './content-client.ts';

let server: BerthServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

describe('content recovery across a killed berth serve', () => {
  it('should fail an interrupted build, never re-run it, keep the active version and build again after', async () => {
    const env = await createNamed(server, 'Interrupted');
    await putFile(server, env.id, 'marker.txt', 'one');
    expect((await build(server, env.id)).status).toBe('ready');
    await putFile(server, env.id, 'setup.sh', 'echo started; sleep 60\n');
    const started = await server.json(`/v1/environments/${env.id}/build`, { method: 'POST' });
    expect(started.version).toBe(2);
    const deadline = Date.now() + 30_000;
    while (!(await server.json(`/v1/environments/${env.id}/builds/2`)).log.includes('started')) {
      if (Date.now() > deadline) throw new Error('the build never started');
      await new Promise((r) => setTimeout(r, 50));
    }

    await server.restart('SIGKILL');
    const record = await waitBuild(server, env.id, 2);
    expect(record).toMatchObject({ status: 'failed', error: 'interrupted by a runtime restart', active: false });
    const view = await server.json(`/v1/environments/${env.id}`);
    expect(view).toMatchObject({ status: 'ready', version: 1, latestVersion: 2, build: { version: 2, status: 'failed' } });
    const versions = path.join(server.dataDir, 'environments', env.id, 'versions');
    expect(readdirSync(versions)).toEqual(['1']);
    expect(existsSync(path.join(versions, '2'))).toBe(false);
    expect((await run(server, env.id, 'cat /env/interrupted/marker.txt')).stdout).toBe('one');

    await putFile(server, env.id, 'setup.sh', 'echo quick\n');
    const third = await build(server, env.id);
    expect(third).toMatchObject({ version: 3, status: 'ready' });
  }, 120_000);
});
