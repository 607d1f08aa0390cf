/**
 * The web console's routes against a hostile caller (DESIGN §13), through the real gateway over the real runtime:
 * the open static route serves exactly its known files (no path, encoded or not, reaches the filesystem); the paged
 * timeline keeps the tenant rule of stream replay (another scope's stream is 404, with or without the failures
 * filter) and bounds its page size; the machines route needs a token and names only registered actor types; the
 * feed from `now` carries only the caller's scope.
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TIMELINE_LIMIT_MAX } from '../../schemas/console.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { readSse } from '../fixtures/sse-reader.ts';
import { createEnvironment, startGateway, submit, tokens, type RunningGateway } from '../integration/gateway-fixture.ts';
import { call, expectError, expectStatus } from '../integration/workspace-http.ts';

let gw: RunningGateway;
beforeAll(async () => {
  gw = await startGateway();
});
afterAll(() => gw?.close());

/** A request line sent byte for byte (fetch would normalise `..` and re-encode the path). */
function rawGet(path: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(gw.port, '127.0.0.1');
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('end', () => resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0), text: data }));
    socket.write(`GET ${path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
  });
}

describe('console static route', () => {
  it('should never serve a file outside its known set, whatever the path or its encoding', async () => {
    const attempts = [
      '/ui/../../etc/passwd',
      '/ui/..%2F..%2F..%2Fetc%2Fpasswd',
      '/ui/%2e%2e/%2e%2e/etc/passwd',
      '/ui/%2e%2e%2f%2e%2e%2fetc%2fpasswd',
      '/ui/%252e%252e%252fetc%252fpasswd',
      '/ui/..%5c..%5cetc%5cpasswd',
      '/ui/%2Fetc%2Fpasswd',
      '/ui/app.js%00.html',
      '/ui/.env',
      '/ui/ui.ts',
      '/ui/package.json',
      '/ui/preact.min.js',
      '/ui/hooks.module.js.map',
      '/ui//etc/passwd',
      '/ui/./app.js/..%2f..%2f..%2fpackage.json',
    ];
    for (const path of attempts) {
      const answer = await rawGet(path);
      expect(answer.status, path).toBeGreaterThanOrEqual(400);
      expect(answer.status, path).toBeLessThan(500);
      // Unrouted paths meet the auth hook first (401); routed ones a refused name (404) or param (400).
      expect(answer.text, path).not.toMatch(/root:x?:0:0|"dependencies"|BERTH_/);
      expect(answer.text, path).toMatch(/"error":\{"code":"(not_found|invalid_request|unauthorized)"/);
    }
  });

  it('should serve the page and exactly the files it references, with a strict content security policy', async () => {
    const page = await call(gw, 'GET', '/ui', { token: '' });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
    const policy = page.headers.get('content-security-policy')!;
    expect(policy).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+'/);
    expect(policy).toContain("frame-ancestors 'none'");
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    const importMap = JSON.parse(/<script type="importmap">([\s\S]*?)<\/script>/.exec(page.text)![1]) as { imports: Record<string, string> };
    const referenced = [...page.text.matchAll(/(?:href|src)="(\/ui\/[^"]+)"/g)].map((m) => m[1]).concat(Object.values(importMap.imports));
    expect(referenced).toEqual(expect.arrayContaining(['/ui/app.js', '/ui/preact.js', '/ui/xterm.js', '/ui/xterm.css']));
    for (const path of referenced) {
      const asset = await call(gw, 'GET', path, { token: '' });
      expect(asset.status, path).toBe(200);
      expect(asset.headers.get('content-type'), path).toMatch(/^text\/(javascript|css)/);
    }
  });
});

describe('paged timeline and machines: the tenant rule and bounds', () => {
  it("should answer 404 to another scope's member for every stream of alice's execution", async () => {
    const env = await createEnvironment(gw);
    const run = await submit(gw, env, ['true']);
    const record = await waitFor(() => expectStatus(call(gw, 'GET', `/v1/executions/${run.id}?waitMs=5000`), 200), {
      what: 'the execution to finish',
      until: (r) => r.status === 'exited',
    });
    const streams = [`execution-${run.id}`, `environment-${env}`, `allocation-${record.target.allocationId}`];
    for (const stream of streams) {
      const mine = await expectStatus(call(gw, 'GET', `/v1/streams/${stream}/timeline?limit=2`), 200);
      expect(mine.steps.length, stream).toBeGreaterThan(0);
      for (const query of ['', '?failures=true', '?from=1&limit=1']) {
        await expectError(call(gw, 'GET', `/v1/streams/${stream}/timeline${query}`, { token: tokens.bob }), 404, 'not_found');
      }
    }
    // The runtime's own stream is nobody's scope: a member reads none of it.
    const runtimeStream = 'runtime-rt_gateway_test';
    await expectError(call(gw, 'GET', `/v1/streams/${runtimeStream}/timeline`), 404, 'not_found');
    await expectError(call(gw, 'GET', '/v1/streams/execution-hexe_absent/timeline'), 404, 'not_found');
  });

  it('should refuse page sizes past the bound and malformed positions, in the error shape', async () => {
    const env = await createEnvironment(gw);
    for (const query of [`limit=${TIMELINE_LIMIT_MAX + 1}`, 'limit=99999999999999999999', 'limit=0', 'limit=-1', 'from=-1', 'from=1e9', 'failures=yes', 'extra=1']) {
      await expectError(call(gw, 'GET', `/v1/streams/environment-${env}/timeline?${query}`), 400, 'invalid_request');
    }
    const page = await expectStatus(call(gw, 'GET', `/v1/streams/environment-${env}/timeline?limit=${TIMELINE_LIMIT_MAX}&from=9007199254740991`), 200);
    expect(page.steps).toEqual([]);
    expect(page.next).toBeNull();
  });

  it('should serve machines only to a token, only for registered actor types', async () => {
    await expectError(call(gw, 'GET', '/v1/machines/execution', { token: '' }), 401, 'unauthorized');
    const alices = await expectStatus(call(gw, 'GET', '/v1/machines/execution'), 200);
    expect(await expectStatus(call(gw, 'GET', '/v1/machines/execution', { token: tokens.bob }), 200)).toEqual(alices);
    await expectError(call(gw, 'GET', '/v1/machines/runtime'), 404, 'not_found');
    await expectError(call(gw, 'GET', '/v1/machines/constructor'), 404, 'not_found');
    await expectError(call(gw, 'GET', '/v1/machines/..%2F..%2Fetc'), 400, 'invalid_request');
  });

  it("should carry only the caller's scope on the feed from now", async () => {
    const bobFeed = await fetch(`${gw.url}/v1/events?after=now`, { headers: gw.headers(tokens.bob) });
    expect(bobFeed.status).toBe(200);
    const aliceEnv = await createEnvironment(gw);
    const bobEnv = await createEnvironment(gw, tokens.bob);
    const events = await readSse(bobFeed, (seen) => seen.some((e) => e.data.includes(bobEnv)));
    expect(events.map((e) => e.data).join('\n')).not.toContain(aliceEnv);
  });
});
