/**
 * Several runtimes on one store send a caller to the owner of an actor (`owned_elsewhere` with `detail.url`), and the
 * client repeats the request there with the caller's token. The URL is what the owner announced when it started
 * serving; a runtime that was killed never says it stopped, so its stream still says `serving` at that URL. On a
 * plain-HTTP loopback URL, whatever process binds the dead runtime's port next (any unprivileged local user may bind
 * a port above 1024) would be handed the token and the request. A runtime of this machine whose process is gone is
 * provably not the one answering there: its URL must not be given out.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpTransport } from '../../src/client/http-transport.ts';
import type { RuntimeRow } from '../../src/projections/runtimes.projection.ts';
import { ownerUrl } from '../../src/runtime/core/owner-url.ts';
import { createEnvironment, startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';

describe('a runtime that was killed, and a local user on its port', () => {
  let scratch: string;
  let a: BerthServer;
  let b: BerthServer;
  let squatter: net.Server | undefined;
  const heard: string[] = [];

  beforeAll(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'berth-owner-redirect-'));
    const store = `sqlite:${join(scratch, 'shared.sqlite3')}`;
    a = await startServer(['--store', store], { BERTH_DOCKER: '0' });
    b = await startServer(['--store', store], { BERTH_DOCKER: '0' });
  }, 120_000);

  afterAll(async () => {
    squatter?.close();
    await b?.close();
    await a?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const submitOn = (environment: string, operationId: string) =>
    new HttpTransport(a.url, tokens.alice).json<{ id: string }>('POST', '/v1/executions', {
      body: { operationId, environment, command: ['/bin/sh', '-c', 'echo secret-command'] },
    });

  it('is sent to while it serves, and never once it is gone', async () => {
    const environment = await createEnvironment(b, tokens.alice);
    // While B serves, a request for its environment reaching A is repeated at B.
    await waitFor(() => submitOn(environment, 'redirect-live').then(() => true, () => false), { until: Boolean, timeoutMs: 20_000, what: 'A to send the caller to B' });

    const port = Number(new URL(b.url).port);
    await b.stop('SIGKILL');
    // Another local user takes B's port and records what it is sent.
    squatter = net.createServer((socket) => {
      socket.on('data', (d: Buffer) => heard.push(d.toString('latin1')));
      socket.on('error', () => undefined);
      setTimeout(() => socket.destroy(), 200);
    });
    await new Promise<void>((resolve, reject) => squatter!.once('error', reject).listen(port, '127.0.0.1', resolve));

    const error = await submitOn(environment, 'redirect-dead').then(() => undefined, (e: unknown) => e);
    expect(heard.join('')).not.toContain(tokens.alice);
    expect(heard.join('')).not.toContain('secret-command');
    expect(heard).toEqual([]);
    // The caller is told who owns it, without a place to send its token.
    expect(error).toMatchObject({ code: 'owned_elsewhere' });
    expect((error as { detail: Record<string, unknown> }).detail.url).toBeUndefined();
  });
});

describe('the owner URL a runtime gives out', () => {
  const row = (over: Partial<RuntimeRow>): RuntimeRow => ({
    runtimeId: 'rt_x',
    epoch: 1,
    state: 'serving',
    url: 'http://127.0.0.1:7421',
    hostname: 'here',
    pid: process.pid,
    startedAt: Date.now(),
    retiredBy: null,
    ...over,
  });

  it('is given for a live runtime of this machine, and for another machine\'s routable URL', () => {
    expect(ownerUrl(row({}), 'here')).toBe('http://127.0.0.1:7421');
    expect(ownerUrl(row({ hostname: 'there', url: 'https://there:7420' }), 'here')).toBe('https://there:7420');
  });

  it('is not given for a pid a later process took over, nor for another machine\'s loopback', () => {
    // This process started after that runtime fenced its epoch: it is not that runtime, though it has its pid.
    expect(ownerUrl(row({ startedAt: Date.now() - 3_600_000 }), 'here')).toBeUndefined();
    expect(ownerUrl(row({ hostname: 'there' }), 'here')).toBeUndefined();
    expect(ownerUrl(row({ hostname: 'there', url: 'http://[::1]:7421' }), 'here')).toBeUndefined();
    expect(ownerUrl(row({ state: 'stopped' }), 'here')).toBeUndefined();
  });
});
