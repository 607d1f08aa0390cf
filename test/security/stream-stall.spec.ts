/**
 * Stalled readers (issue 10, finding 6): the WebSocket closed a client that stopped reading but kept its socket and
 * buffers 30 s more; SSE waited for it forever. Against a real `berth serve` with a 2 s stall window, a client of a
 * 64 MiB output that reads nothing is dropped: SSE within the window, a WebSocket (whose 1013 close frame waits behind
 * the unread bytes) within one more. Reading again, it gets only what was buffered, then the end, never the rest;
 * its slot is given back, and the close is logged.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { openStalled, type StalledClient } from './stalled-client.ts';

const STALL_MS = 2000;
const OUTPUT = 64 * 1024 * 1024;
let server: BerthServer;
let id: string;
const auth = { authorization: `Bearer ${tokens.alice}` };

beforeAll(async () => {
  server = await startServer([], { BERTH_STREAM_STALL_MS: String(STALL_MS), BERTH_MAX_STREAMS_PER_TOKEN: '1', BERTH_LOG_LEVEL: 'info' });
  const env = await createEnvironment(server);
  id = (await submit(server, env, ['head', '-c', String(OUTPUT), '/dev/zero'])).id;
  expect((await finished(server, id)).status).toBe('exited');
});
afterAll(() => server?.close());

const drained = async (client: StalledClient) => {
  const resumed = Date.now();
  const got = await client.drain();
  return { got, ms: Date.now() - resumed };
};

it('drops an SSE client that reads nothing within the stall window and gives its slot back', async () => {
  const client = await openStalled(server.url, `/v1/executions/${id}/events?stream=stdout`, 'sse', auth);
  expect(client.status).toBe(200);
  // The window, plus time for the socket buffers to fill before it starts.
  await new Promise((resolve) => setTimeout(resolve, STALL_MS + 3000));
  const { got: bytes, ms } = await drained(client);
  const got = bytes.toString('latin1');
  // Already closed by the server: reading again ends at once, short of the output and without the final status.
  expect(ms).toBeLessThan(3000);
  expect(got.length).toBeLessThan((OUTPUT * 4) / 3);
  expect(got).not.toContain('event: status');
  const next = await openStalled(server.url, `/v1/executions/${id}/events?stream=stdout&stdout=${OUTPUT - 10}`, 'sse', auth);
  expect(next.status).toBe(200); // the cap is 1: the dropped stream gave its slot back
  expect((await next.drain()).toString()).toContain('event: status');
  expect(server.process.stderr()).toContain('closing an SSE client that stopped reading');
}, 30_000);

it('drops a WebSocket client that reads nothing, close frame unread, within two stall windows', async () => {
  await new Promise((resolve) => setTimeout(resolve, 200)); // the SSE test's last stream has left
  const client = await openStalled(server.url, `/v1/executions/${id}/stream`, 'ws', auth);
  expect(client.status).toBe(101);
  await new Promise((resolve) => setTimeout(resolve, 2 * STALL_MS + 3000));
  const { got, ms } = await drained(client);
  expect(ms).toBeLessThan(3000);
  expect(got.length).toBeLessThan(OUTPUT);
  const next = await openStalled(server.url, `/v1/executions/${id}/stream?stdout=${OUTPUT}`, 'ws', auth);
  expect(next.status).toBe(101);
  next.socket.destroy();
  expect(server.process.stderr()).toContain('closing a websocket client that stopped reading');
}, 30_000);
