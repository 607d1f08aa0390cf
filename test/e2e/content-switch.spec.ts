/**
 * Seed 001 §7: a server with the Environments content chapter switched off (BERTH_ENVIRONMENTS_CONTENT=0) reports
 * environments false and answers every endpoint of the chapter with 404, never a partial implementation. The
 * environment catalog itself (CRUD, allocations, executions) is Berth's own and stays.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type BerthServer } from './berth-server.ts';
import { createNamed, expectError, run, send } from './content-client.ts';

let server: BerthServer;
beforeAll(async () => {
  server = await startServer([], { BERTH_ENVIRONMENTS_CONTENT: '0' });
});
afterAll(() => server?.close());

describe('the content chapter switched off', () => {
  it('should report environments false and answer 404 at every content endpoint', async () => {
    expect((await server.json('/v1/capabilities')).capabilities.environments).toBe(false);
    const env = await createNamed(server, 'Plain Only');
    const json = { 'content-type': 'application/json' };
    const endpoints: [string, string, string?, Record<string, string>?][] = [
      ['GET', `/v1/environments/${env.id}/files`],
      ['GET', `/v1/environments/${env.id}/files/a.txt`],
      ['PUT', `/v1/environments/${env.id}/files/a.txt`, 'x'],
      ['DELETE', `/v1/environments/${env.id}/files/a.txt`],
      ['POST', `/v1/environments/${env.id}/directories`, '{"path":"d"}', json],
      ['POST', `/v1/environments/${env.id}/import`, 'x'],
      ['POST', `/v1/environments/${env.id}/build`],
      ['GET', `/v1/environments/${env.id}/builds/1`],
      ['GET', `/v1/environments/${env.id}/versions`],
      ['POST', `/v1/environments/${env.id}/versions/1/activate`],
      ['GET', `/v1/environments/${env.id}/harnesses`],
      ['POST', '/v1/harnesses', '{"name":"h"}', json],
      ['GET', '/v1/harnesses'],
      ['GET', `/v1/harnesses/hhrn_${'0'.repeat(32)}`],
      ['PUT', `/v1/harnesses/hhrn_${'0'.repeat(32)}`, '{"name":"h"}', json],
      ['DELETE', `/v1/harnesses/hhrn_${'0'.repeat(32)}`],
    ];
    for (const [method, path, body, headers] of endpoints) {
      const detail = await expectError(send(server, method, path, body, headers), 404, 'not_found');
      expect(detail, `${method} ${path}`).toMatchObject({ method });
    }
    // Berth's own catalog and executions are not part of the chapter.
    expect((await run(server, env.id, 'echo still runs')).stdout).toBe('still runs\n');
  });
});
