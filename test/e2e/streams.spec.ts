/**
 * Streaming from a real `berth serve` child while real commands run: the execution WebSocket read by a client
 * written from DESIGN §8 alone (byte-identical output; a killed connection resumed from its cursors gets exactly the
 * missing bytes; closing it cancels nothing; a client that stops reading is closed with 1013 and resumes), SSE output
 * resumed after Last-Event-ID, and the audit feed resumed after a global position.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outputEventDataSchema } from '../../schemas/api.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from './berth-server.ts';
import { emitScript, expectedOutput } from '../fixtures/emit-bytes.mjs';
import { rawConnect } from '../fixtures/raw-ws-client.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { outputBytes, readSse } from '../fixtures/sse-reader.ts';

let server: BerthServer;
let env: string;

beforeAll(async () => {
  // At info the gateway logs when it closes a client that stopped reading: the 1013 spec waits for that line.
  server = await startServer([], { BERTH_LOG_LEVEL: 'info' });
  env = await createEnvironment(server);
});
afterAll(() => server?.close());

/** A real command writing `bytes` to stdout (and bytes/8 to stderr) over `durationMs`. */
const emit = (bytes: number, durationMs: number) => [process.execPath, emitScript, String(bytes), String(durationMs)];
const auth = (token = tokens.alice) => ({ authorization: `Bearer ${token}` });
const wsUrl = (id: string, query = '') => `${server.url.replace('http', 'ws')}/v1/executions/${id}/stream${query}`;

/** How many clients that stopped reading the gateway has closed so far (its info log). */
const stallCloses = () => server.process.stderr().split('closing a websocket client that stopped reading').length - 1;

/** The execution's stream events: a disconnect must never have asked for a cancel. */
async function cancelRequests(id: string): Promise<number> {
  const steps = await server.json<{ event: { type: string } }[]>(`/v1/streams/execution-${id}`);
  return steps.filter((s) => s.event.type.startsWith('execution.cancel')).length;
}

describe('execution WebSocket (client from DESIGN §8 alone)', () => {
  it('receives byte-identical output of a real command, status frames, the terminal status last, then 1000', async () => {
    const record = await submit(server, env, emit(2_000_000, 800));
    const s = rawConnect(wsUrl(record.id), auth());
    expect(await s.closed).toBe(1000);
    expect(s.gaps).toEqual([]);
    expect(s.joined('stdout').equals(expectedOutput('stdout', 2_000_000))).toBe(true);
    expect(s.joined('stderr').equals(expectedOutput('stderr', 250_000))).toBe(true);
    const statuses = s.texts.map((t) => (t.type === 'status' ? t.status : t.type));
    expect(statuses.at(-1)).toBe('exited');
    expect(statuses.filter((x) => x === 'exited')).toHaveLength(1);
    expect(s.texts.at(-1)).toMatchObject({ type: 'status', id: record.id, operationId: record.operationId, exitCode: 0 });
  });

  it('gets exactly the missing bytes after being killed mid-stream and reconnecting with its cursors', async () => {
    const size = 6_000_000;
    const record = await submit(server, env, emit(size, 2000));
    const first = rawConnect(wsUrl(record.id), auth());
    await first.received('stdout', 500_000);
    first.ws.terminate();
    expect(await first.closed).toBe(1006);
    const { stdout, stderr = 0 } = first.cursors;
    expect(stdout).toBeLessThan(size);

    const second = rawConnect(wsUrl(record.id, `?stdout=${stdout}&stderr=${stderr}`), auth());
    expect(await second.closed).toBe(1000);
    expect([...first.gaps, ...second.gaps]).toEqual([]);
    expect(second.firstCursor.stdout).toBe(stdout);
    expect(Buffer.concat([first.joined('stdout'), second.joined('stdout')]).equals(expectedOutput('stdout', size))).toBe(true);
    expect(Buffer.concat([first.joined('stderr'), second.joined('stderr')]).equals(expectedOutput('stderr', size / 8))).toBe(true);
    expect(await cancelRequests(record.id)).toBe(0);
  });

  it('does not cancel the command when the client closes', async () => {
    const record = await submit(server, env, emit(200_000, 1500));
    const s = rawConnect(wsUrl(record.id), auth());
    await s.received('stdout', 1);
    s.ws.close(1000, 'bye');
    expect(await s.closed).toBe(1000);
    const done = await finished(server, record.id);
    expect(done).toMatchObject({ status: 'exited', exitCode: 0 });
    expect(await cancelRequests(record.id)).toBe(0);
    const all = Buffer.from(await (await server.call(`/v1/executions/${record.id}/output?maxBytes=1000000`)).arrayBuffer());
    expect(all.equals(expectedOutput('stdout', 200_000))).toBe(true);
  });

  it('closes a client that stops reading with 1013; it resumes from its cursors and gets everything', async () => {
    const size = 64 * 1024 * 1024;
    const record = await submit(server, env, emit(size, 0));
    const s = rawConnect(wsUrl(record.id), auth());
    await s.opened;
    // Stop reading: the socket, then the gateway's send buffer (512 KiB) fill up; the gateway gives up after 10 s
    // above that bound. Its close frame sits behind the unread data, so read again to see it.
    const closesBefore = stallCloses();
    s.ws.pause();
    await waitFor(stallCloses, { until: (n) => n > closesBefore, timeoutMs: 30_000, intervalMs: 200, what: 'the gateway to close the stalled client' });
    s.ws.resume();
    expect(await s.closed).toBe(1013);
    expect(s.cursors.stdout ?? 0).toBeLessThan(size);
    const rest = rawConnect(wsUrl(record.id, `?stdout=${s.cursors.stdout ?? 0}&stderr=${s.cursors.stderr ?? 0}`), auth());
    expect(await rest.closed).toBe(1000);
    expect([...s.gaps, ...rest.gaps]).toEqual([]);
    expect(Buffer.concat([s.joined('stdout'), rest.joined('stdout')]).equals(expectedOutput('stdout', size))).toBe(true);
    expect((await finished(server, record.id)).status).toBe('exited');
    expect(await cancelRequests(record.id)).toBe(0);
  }, 90_000);

  it("authenticates the upgrade by header or ?token= and hides another tenant's execution", async () => {
    const record = await submit(server, env, ['echo', 'hello']);
    await expect(rawConnect(wsUrl(record.id), {}).opened).rejects.toThrow('HTTP 401');
    await expect(rawConnect(wsUrl(record.id), auth(tokens.bob)).opened).rejects.toThrow('HTTP 404');
    const viaQuery = rawConnect(wsUrl(record.id, `?token=${tokens.alice}`), {});
    expect(await viaQuery.closed).toBe(1000);
    expect(viaQuery.joined('stdout').toString()).toBe('hello\n');
  });
});

describe('SSE', () => {
  it('streams output as id <stream>:<cursor> events and resumes after Last-Event-ID with exactly the missing bytes', async () => {
    const size = 1_500_000;
    const record = await submit(server, env, emit(size, 1500));
    const url = `/v1/executions/${record.id}/events?stream=stdout`;
    const response = await server.call(url, { headers: { accept: 'text/event-stream' } });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const first = await readSse(response, (events) => events.filter((e) => e.event === 'output').length >= 2);
    let cursor = 0;
    for (const e of first.filter((x) => x.event === 'output')) {
      const data = outputEventDataSchema.parse(JSON.parse(e.data)); // exactly {stream, cursor, data}
      expect(data.cursor).toBe(cursor);
      cursor += Buffer.from(data.data, 'base64').length;
      expect(e.id).toBe(`stdout:${cursor}`);
    }
    expect(cursor).toBeLessThan(size);
    const lastId = first.filter((x) => x.event === 'output').at(-1)!.id!;

    const rest = await readSse(await server.call(url, { headers: { 'last-event-id': lastId } }), () => false);
    expect(outputEventDataSchema.parse(JSON.parse(rest.find((e) => e.event === 'output')!.data)).cursor).toBe(cursor);
    expect(Buffer.concat([outputBytes(first, 'stdout'), outputBytes(rest, 'stdout')]).equals(expectedOutput('stdout', size))).toBe(true);
    const final = rest.at(-1)!;
    expect(final.event).toBe('status');
    expect(JSON.parse(final.data)).toMatchObject({ id: record.id, status: 'exited', exitCode: 0 });
  });

  it('serves the audit feed with global positions as ids, resumable after any position, scoped to the tenant', async () => {
    const bobEnv = await createEnvironment(server, tokens.bob);
    const record = await submit(server, env, ['true']);
    await finished(server, record.id);
    const first = await readSse(await server.call('/v1/events', { headers: { accept: 'text/event-stream' } }), (events) =>
      events.some((e) => JSON.parse(e.data).stream === `execution-${record.id}` && JSON.parse(e.data).type === 'execution.released'),
    );
    expect(first.length).toBeGreaterThan(6);
    for (const e of first) {
      const data = JSON.parse(e.data) as { position: string; type: string; stream: string };
      expect(e.id).toBe(data.position);
      expect(e.event).toBe(data.type);
      expect(data.stream).not.toContain(bobEnv);
    }
    const ids = first.map((e) => BigInt(e.id!));
    expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);

    const at = first[3]!.id!;
    const resumed = await readSse(await server.call('/v1/events', { headers: { 'last-event-id': at } }), (events) => events.length >= first.length - 4);
    expect(resumed.map((e) => e.id)).toEqual(first.slice(4).map((e) => e.id));
    const viaQuery = await readSse(await server.call(`/v1/events?after=${at}`), (events) => events.length >= 1);
    expect(viaQuery[0]!.id).toBe(first[4]!.id);

    const bobs = await readSse(await server.call('/v1/events', { token: tokens.bob }), (events) => events.some((e) => e.data.includes(bobEnv)));
    expect(bobs.every((e) => !e.data.includes(env))).toBe(true);
  });
});
