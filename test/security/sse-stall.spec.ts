/**
 * A stalled SSE reader (issue 10, finding 6): the WebSocket closed a client that stopped reading, SSE waited for it
 * forever with its buffers. Against a real `berth serve` with a 2 s stall window: an SSE client of a 64 MiB output
 * that reads nothing is dropped within the window (reading again, it gets only what was buffered, then the end, never
 * the final status), its slot is given back, and the close is logged; the audit feed uses the same writer.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { openStalled } from './stalled-client.ts';

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

it('drops an SSE client that reads nothing within the stall window and gives its slot back', async () => {
  const client = await openStalled(server.url, `/v1/executions/${id}/events?stream=stdout`, 'sse', auth);
  expect(client.status).toBe(200);
  // The window, plus time for the socket buffers to fill before it starts.
  await new Promise((resolve) => setTimeout(resolve, STALL_MS + 3000));
  const resumed = Date.now();
  const got = (await client.drain()).toString('latin1');
  // Already closed by the server: reading again ends at once, short of the output and without the final status.
  expect(Date.now() - resumed).toBeLessThan(3000);
  expect(got.length).toBeLessThan((OUTPUT * 4) / 3);
  expect(got).not.toContain('event: status');
  const next = await openStalled(server.url, `/v1/executions/${id}/events?stream=stdout&stdout=${OUTPUT - 10}`, 'sse', auth);
  expect(next.status).toBe(200); // the cap is 1: the dropped stream gave its slot back
  expect((await next.drain()).toString()).toContain('event: status');
  expect(server.process.stderr()).toContain('closing an SSE client that stopped reading');
}, 30_000);
