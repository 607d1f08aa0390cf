/**
 * Stdin over an execution WebSocket from a hostile member (DESIGN §13: streams cost bounded memory per client). The
 * gateway queued each client binary frame behind the previous write to the command's stdin, and a write waits while
 * the pipe is full: to a command that never reads its stdin, every frame sent stayed in server memory. One socket
 * sending 1 GiB took a server from 160 MB to 1.1 GB, and the memory stayed held after the client left. Against a real
 * `berth serve`: a client flooding a command that does not read takes at most a few MiB of the server (the socket is
 * read no faster than stdin takes the bytes), and a command that reads gets every byte of a fast 8 MiB stdin, in order.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';

const MiB = 1024 * 1024;
let server: BerthServer;
let environment: string;

beforeAll(async () => {
  server = await startServer();
  environment = await createEnvironment(server);
}, 120_000);
afterAll(() => server?.close());

const rssOf = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;

function connect(id: string): Promise<WebSocket> {
  const ws = new WebSocket(`${server.url.replace('http', 'ws')}/v1/executions/${id}/stream`, {
    headers: { authorization: `Bearer ${tokens.alice}` },
    perMessageDeflate: false,
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

/**
 * Sends up to `total` bytes of 1 MiB frames, keeping at most 8 MiB in the client's own buffer, until all are sent or
 * the server has taken nothing for `idleMs`; answers how many bytes left the client.
 */
async function flood(ws: WebSocket, total: number, idleMs: number): Promise<number> {
  const frame = Buffer.alloc(MiB, 0x61);
  let queued = 0;
  let lastTaken = 0;
  let lastProgress = Date.now();
  for (;;) {
    const taken = queued - ws.bufferedAmount;
    if (taken > lastTaken) [lastTaken, lastProgress] = [taken, Date.now()];
    if (taken >= total || Date.now() - lastProgress > idleMs || ws.readyState !== WebSocket.OPEN) return taken;
    if (queued < total && ws.bufferedAmount < 8 * MiB) {
      ws.send(frame);
      queued += frame.length;
    } else {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

describe('stdin over the execution WebSocket', () => {
  it('holds a few MiB of the server at most while a command does not read what a client floods it with', async () => {
    const record = await submit(server, environment, ['sleep', '120'], { stdin: true });
    await running(server, record.id);
    const pid = server.process.child.pid!;
    const before = rssOf(pid);
    const ws = await connect(record.id);
    const taken = await flood(ws, 256 * MiB, 3_000);
    const grown = rssOf(pid) - before;
    ws.terminate();
    await server.json(`/v1/executions/${record.id}/cancel`, { method: 'POST' });
    await finished(server, record.id);
    // Before the fix the server read all 256 MiB (and held them); now the kernel's socket buffers and one
    // stdin bound are all it takes.
    expect(taken).toBeLessThan(48 * MiB);
    expect(grown).toBeLessThan(96 * MiB);
    expect(await (await fetch(`${server.url}/healthz`)).json()).toMatchObject({ status: 'ok' });
  }, 120_000);

  it('gives a command that reads every byte of a fast 8 MiB stdin, and the end of it', async () => {
    const record = await submit(server, environment, ['wc', '-c'], { stdin: true });
    const ws = await connect(record.id);
    const sent = await flood(ws, 8 * MiB, 20_000);
    expect(sent).toBe(8 * MiB);
    ws.send(JSON.stringify({ type: 'end' }));
    const done = await finished(server, record.id);
    ws.close();
    expect(done.status).toBe('exited');
    const output = await (await server.call(`/v1/executions/${record.id}/output?stream=stdout`)).text();
    expect(output.trim()).toBe(String(8 * MiB));
  }, 120_000);
});
