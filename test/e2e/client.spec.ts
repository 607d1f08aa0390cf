/**
 * The typed client against a real `berth serve` child that is stopped (SIGTERM) or killed (SIGKILL) mid-command and
 * started again on the same data directory and port: `executions.run` keeps following, the command keeps running
 * (one execution for the operationId, no cancel), and the output it delivers is complete and byte-identical. And a
 * client too slow to read is closed with 1013 by the server and resumes from its cursors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Berth } from '../../src/client/berth-client.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';
import { emitScript, expectedOutput } from '../fixtures/emit-bytes.mjs';

let server: BerthServer;
let client: Berth;

beforeAll(async () => {
  server = await startServer([], { BERTH_LOG_LEVEL: 'info' }); // the 1013 is logged at info
  client = await Berth.connect({ url: server.url, token: tokens.alice, backoff: { initialMs: 50, maxMs: 500, giveUpAfterMs: 60_000 } });
});
afterAll(() => server?.close());

describe.each(['SIGTERM', 'SIGKILL'] as const)('executions.run across a server restart (%s)', (signal) => {
  it('keeps the command running and delivers its output complete and byte-identical', async () => {
    const env = await client.environments.create({ name: `restart ${signal}` });
    const size = 4_000_000;
    const operationId = `restart-${signal}-${Date.now()}`;
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    let received = 0;
    let id = '';
    const run = client.executions.run(env.id, [process.execPath, emitScript, String(size), '5000'], {
      operationId,
      onSubmitted: (record) => (id = record.id),
      onStdout: (chunk) => {
        stdout.push(chunk);
        received += chunk.length;
      },
      onStderr: (chunk) => stderr.push(chunk),
    });
    while (received < 400_000) await new Promise((resolve) => setTimeout(resolve, 10));
    const epochBefore = (await server.json('/healthz', { token: null })).epoch;
    await server.restart(signal);
    expect((await server.json('/healthz', { token: null })).epoch).toBe(epochBefore + 1);
    const atRestart = received;

    const record = await run;
    expect(atRestart).toBeLessThan(size); // the restart really happened mid-command
    expect(record).toMatchObject({ id, status: 'exited', exitCode: 0 });
    expect(Buffer.concat(stdout).equals(expectedOutput('stdout', size))).toBe(true);
    expect(Buffer.concat(stderr).equals(expectedOutput('stderr', size / 8))).toBe(true);
    expect(await client.executions.list({ operationId })).toHaveLength(1);
    const steps = await server.json<{ event: { type: string } }[]>(`/v1/streams/execution-${id}`);
    expect(steps.map((s) => s.event.type).filter((t) => t.startsWith('execution.cancel'))).toEqual([]);
    expect(steps.filter((s) => s.event.type === 'execution.dispatched')).toHaveLength(1); // never run twice
  }, 90_000);
});

describe('a client that stops reading', () => {
  it('is closed with 1013 and resumes from its cursors with every byte once', async () => {
    const env = await client.environments.create({ name: 'slow reader' });
    // 64 MiB, finished first: more than loopback's kernel buffers (up to 32 MiB receive, 4 MiB send) plus the
    // server's 512 KiB send bound, available at once, so the server's buffer stays full while this client is stuck.
    const size = 64 * 1024 * 1024;
    const submitted = await client.executions.submit({ operationId: `slow-${Date.now()}`, environment: env.id, command: [process.execPath, emitScript, String(size), '0'] });
    expect((await client.executions.get(submitted.id, { waitMs: 60_000 })).status).toBe('exited');
    const stdout: Buffer[] = [];
    let stalled = false;
    const record = await client.executions.follow(submitted.id, {
      onStdout: (chunk) => {
        stdout.push(chunk);
        if (stalled) return;
        stalled = true;
        // Stuck for longer than the server's 10 s stall bound.
        const until = Date.now() + 12_000;
        while (Date.now() < until);
      },
    });
    expect(record.status).toBe('exited');
    expect(Buffer.concat(stdout).equals(expectedOutput('stdout', size))).toBe(true);
    const logs = server.process.stderr();
    expect(logs).toContain('closing a websocket client that stopped reading');
    for (const token of Object.values(tokens)) expect(logs).not.toContain(token); // a whole run's logs at info
  }, 90_000);
});
