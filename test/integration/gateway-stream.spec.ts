/**
 * Streaming over a real listening gateway: the execution WebSocket read by a raw `ws` client written from DESIGN §8
 * alone (frames decoded here by hand, not with the gateway's codec), resume from cursors, 1013 for a client that
 * stops reading, stdin and controls, upgrade auth; SSE output and the audit feed resumed with Last-Event-ID.
 * Runs over the in-test FakeRuntimeApi until the real runtime exists (see its header).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { outputEventDataSchema } from '../../schemas/api.ts';
import { expectedOutput } from '../unit/gateway/fake-runtime-api.ts';
import { SseParser, type ParsedSseEvent } from '../../src/client/sse-parser.ts';
import { createEnvironment, startGateway, submit, tokens, type RunningGateway } from './gateway-fixture.ts';

let gw: RunningGateway;
let env: string;

beforeAll(async () => {
  gw = await startGateway({ limits: { wsBufferBytes: 256 * 1024, wsStallMs: 300, chunkBytes: 64 * 1024, heartbeatMs: 100 } });
  env = await createEnvironment(gw);
});
afterAll(() => gw.close());

const names = { 1: 'stdout', 2: 'stderr', 3: 'pty' } as Record<number, string>;

interface RawSession {
  ws: WebSocket;
  bytes: Record<string, Buffer[]>;
  /** Cursor after the last byte received per stream. */
  cursors: Record<string, number>;
  /** The cursor of each stream's first frame. */
  firstCursor: Record<string, number>;
  texts: Record<string, unknown>[];
  closed: Promise<number>;
  opened: Promise<void>;
}

/** A client from DESIGN §8 only: byte 0 stream, bytes 1-8 u64 BE cursor of the first data byte, then data. */
function rawConnect(path: string, headers: Record<string, string> = gw.headers()): RawSession {
  const ws = new WebSocket(`${gw.url.replace('http', 'ws')}${path}`, { headers, perMessageDeflate: false });
  const session: RawSession = {
    ws,
    bytes: { stdout: [], stderr: [], pty: [] },
    cursors: {},
    firstCursor: {},
    texts: [],
    closed: new Promise((resolve) => ws.on('close', (code) => resolve(code))),
    opened: new Promise((resolve, reject) => {
      ws.on('open', () => resolve());
      ws.on('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
      ws.on('error', reject);
    }),
  };
  session.opened.catch(() => undefined);
  ws.on('message', (data: Buffer, isBinary) => {
    if (!isBinary) return void session.texts.push(JSON.parse(data.toString()));
    const stream = names[data[0]!]!;
    const cursor = Number(data.readBigUInt64BE(1));
    const payload = Buffer.from(data.subarray(9));
    if (session.cursors[stream] === undefined) session.firstCursor[stream] = cursor;
    else expect(cursor).toBe(session.cursors[stream]); // contiguous
    session.cursors[stream] = cursor + payload.length;
    session.bytes[stream]!.push(payload);
  });
  return session;
}

const joined = (s: RawSession, stream: string) => Buffer.concat(s.bytes[stream]!);

describe('execution WebSocket', () => {
  it('delivers byte-identical output, status frames, the terminal status last, then closes 1000', async () => {
    const record = await submit(gw, env, ['emit', '2000000', '300']);
    const s = rawConnect(`/v1/executions/${record.id}/stream`);
    expect(await s.closed).toBe(1000);
    expect(joined(s, 'stdout').equals(expectedOutput('stdout', 2_000_000))).toBe(true);
    expect(joined(s, 'stderr').equals(expectedOutput('stderr', 250_000))).toBe(true);
    const statuses = s.texts.map((t) => (t.type === 'status' ? t.status : t.type));
    expect(statuses.at(-1)).toBe('exited');
    expect(statuses.filter((x) => x === 'exited')).toHaveLength(1);
    expect(s.texts.at(-1)).toMatchObject({ type: 'status', id: record.id, operationId: record.operationId, exitCode: 0 });
  });

  it('resumes from cursors after a killed connection with exactly the missing bytes', async () => {
    const record = await submit(gw, env, ['emit', '3000000', '400']);
    const first = rawConnect(`/v1/executions/${record.id}/stream`);
    await first.opened;
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if ((first.cursors.stdout ?? 0) > 500_000) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    first.ws.terminate();
    const code = await first.closed;
    expect(code).toBe(1006);
    const stdout = first.cursors.stdout!;
    const stderr = first.cursors.stderr ?? 0;
    expect(stdout).toBeLessThan(3_000_000);

    const second = rawConnect(`/v1/executions/${record.id}/stream?stdout=${stdout}&stderr=${stderr}`);
    expect(await second.closed).toBe(1000);
    expect(second.firstCursor.stdout).toBe(stdout);
    const all = Buffer.concat([joined(first, 'stdout'), joined(second, 'stdout')]);
    expect(all.equals(expectedOutput('stdout', 3_000_000))).toBe(true);
    const errAll = Buffer.concat([joined(first, 'stderr'), joined(second, 'stderr')]);
    expect(errAll.equals(expectedOutput('stderr', 375_000))).toBe(true);
    const record2 = (await (await fetch(`${gw.url}/v1/executions/${record.id}`, { headers: gw.headers() })).json()) as { status: string };
    expect(record2.status).toBe('exited'); // the disconnect cancelled nothing
  });

  it('closes a client that stops reading with 1013, without cancelling the execution', async () => {
    const cancelsBefore = gw.api.cancelCalls;
    const size = 16 * 1024 * 1024;
    const record = await submit(gw, env, ['emit', String(size), '0']);
    const s = rawConnect(`/v1/executions/${record.id}/stream`);
    await s.opened;
    s.ws.pause();
    // The gateway notices within wsStallMs once the kernel buffers are full; give it time, then read again.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    s.ws.resume();
    expect(await s.closed).toBe(1013);
    expect(s.cursors.stdout ?? 0).toBeLessThan(size);
    expect(gw.api.cancelCalls).toBe(cancelsBefore);
    const after = (await (await fetch(`${gw.url}/v1/executions/${record.id}`, { headers: gw.headers() })).json()) as { status: string };
    expect(after.status).toBe('exited');
    // Reconnecting from the cursors finishes the job.
    const rest = rawConnect(`/v1/executions/${record.id}/stream?stdout=${s.cursors.stdout ?? 0}&stderr=${s.cursors.stderr ?? 0}`);
    expect(await rest.closed).toBe(1000);
    expect(Buffer.concat([joined(s, 'stdout'), joined(rest, 'stdout')]).equals(expectedOutput('stdout', size))).toBe(true);
  });

  it('takes stdin as binary frames, resize and end as text, and reports refused frames', async () => {
    const record = await submit(gw, env, ['cat'], { stdin: true });
    const s = rawConnect(`/v1/executions/${record.id}/stream`);
    await s.opened;
    s.ws.send(Buffer.from('hello '));
    s.ws.send(Buffer.from([0, 255, 10]));
    s.ws.send(JSON.stringify({ type: 'resize', cols: 100, rows: 40 }));
    s.ws.send('not json');
    s.ws.send(JSON.stringify({ type: 'resize', cols: -1, rows: 40 }));
    s.ws.send(JSON.stringify({ type: 'end' }));
    expect(await s.closed).toBe(1000);
    expect(joined(s, 'stdout').equals(Buffer.concat([Buffer.from('hello '), Buffer.from([0, 255, 10])]))).toBe(true);
    const errors = s.texts.filter((t) => t.type === 'error') as { error: { code: string } }[];
    expect(errors.map((e) => e.error.code)).toEqual(['invalid_request', 'invalid_request']);
    const replay = (await (await fetch(`${gw.url}/v1/streams/execution-${record.id}`, { headers: gw.headers() })).json()) as {
      event: { type: string; data: unknown };
    }[];
    expect(replay.map((r) => r.event)).toContainEqual(expect.objectContaining({ type: 'execution.resized', data: { cols: 100, rows: 40 } }));
  });

  it('authenticates the upgrade by header or ?token= and hides other scopes', async () => {
    const record = await submit(gw, env, ['emit', '10', '10']);
    const path = `/v1/executions/${record.id}/stream`;
    await expect(rawConnect(path, {}).opened).rejects.toThrow('HTTP 401');
    await expect(rawConnect(path, gw.headers('not-a-token-at-all-xx')).opened).rejects.toThrow('HTTP 401');
    await expect(rawConnect(path, gw.headers(tokens.bob)).opened).rejects.toThrow('HTTP 404');
    await expect(rawConnect(`${path}?stdout=-4`).opened).rejects.toThrow('HTTP 400');
    await expect(rawConnect('/v1/capabilities').opened).rejects.toThrow('HTTP 400');
    await expect(rawConnect('/v1/nowhere').opened).rejects.toThrow('HTTP 404');
    const viaQuery = rawConnect(`${path}?token=${tokens.alice}`, {});
    expect(await viaQuery.closed).toBe(1000);
    expect(joined(viaQuery, 'stdout').equals(expectedOutput('stdout', 10))).toBe(true);
    expect(gw.logs.join('')).not.toContain(tokens.alice);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });
});

async function readSse(response: Response, until: (events: ParsedSseEvent[]) => boolean): Promise<ParsedSseEvent[]> {
  const parser = new SseParser();
  const decoder = new TextDecoder();
  const events: ParsedSseEvent[] = [];
  const reader = response.body!.getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    events.push(...parser.push(decoder.decode(value, { stream: true })));
    if (until(events)) {
      await reader.cancel();
      break;
    }
  }
  return events;
}

const outputBytes = (events: ParsedSseEvent[], stream: string) =>
  Buffer.concat(
    events
      .filter((e) => e.event === 'output')
      .map((e) => JSON.parse(e.data) as { stream: string; data: string })
      .filter((d) => d.stream === stream)
      .map((d) => Buffer.from(d.data, 'base64')),
  );

describe('SSE', () => {
  it('streams output in the DESIGN §8 format and resumes after Last-Event-ID with exactly the missing bytes', async () => {
    const record = await submit(gw, env, ['emit', '400000', '300']);
    const url = `${gw.url}/v1/executions/${record.id}/events?stream=stdout`;
    const response = await fetch(url, { headers: gw.headers() });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const first = await readSse(response, (events) => events.filter((e) => e.event === 'output').length >= 3);
    const outputs = first.filter((e) => e.event === 'output');
    let expectedCursor = 0;
    for (const e of outputs) {
      const data = outputEventDataSchema.parse(JSON.parse(e.data)); // exactly {stream, cursor, data}
      expect(data.cursor).toBe(expectedCursor);
      expectedCursor += Buffer.from(data.data, 'base64').length;
      expect(e.id).toBe(`stdout:${expectedCursor}`);
    }
    const lastId = outputs.at(-1)!.id!;

    const resumed = await fetch(url, { headers: { ...gw.headers(), 'last-event-id': lastId } });
    const rest = await readSse(resumed, () => false);
    const firstRest = JSON.parse(rest.find((e) => e.event === 'output')!.data) as { cursor: number };
    expect(firstRest.cursor).toBe(expectedCursor);
    expect(Buffer.concat([outputBytes(first, 'stdout'), outputBytes(rest, 'stdout')]).equals(expectedOutput('stdout', 400000))).toBe(true);
    const final = rest.at(-1)!;
    expect(final.event).toBe('status');
    expect(JSON.parse(final.data)).toMatchObject({ id: record.id, status: 'exited' });
  });

  it('follows every stream by default and ends with the terminal status', async () => {
    const record = await submit(gw, env, ['emit', '8000', '50']);
    const events = await readSse(await fetch(`${gw.url}/v1/executions/${record.id}/events`, { headers: gw.headers() }), () => false);
    expect(outputBytes(events, 'stdout').equals(expectedOutput('stdout', 8000))).toBe(true);
    expect(outputBytes(events, 'stderr').equals(expectedOutput('stderr', 1000))).toBe(true);
    expect(events.filter((e) => e.event === 'status').map((e) => JSON.parse(e.data).status).at(-1)).toBe('exited');
  });

  it('sends heartbeat comments while nothing happens', async () => {
    const record = await submit(gw, env, ['emit', '10', '2000']);
    const response = await fetch(`${gw.url}/v1/executions/${record.id}/events?stream=stdout&stdout=10`, { headers: gw.headers() });
    const reader = response.body!.getReader();
    let text = '';
    const until = Date.now() + 3000;
    while (!text.includes(': heartbeat\n\n') && Date.now() < until) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    expect(text).toContain(': heartbeat\n\n');
    expect(text).not.toContain('event: output'); // started at the end of stdout: nothing to send but heartbeats
  });

  it('serves the audit feed with global positions as ids, resumable with Last-Event-ID, scoped to the caller', async () => {
    await createEnvironment(gw, tokens.bob, 'bob env');
    await submit(gw, env, ['emit', '10', '10']);
    const headers = { ...gw.headers(), accept: 'text/event-stream' };
    const first = await readSse(await fetch(`${gw.url}/v1/events`, { headers }), (events) => events.length >= 6);
    for (const e of first) {
      const data = JSON.parse(e.data) as { position: string; type: string; metadata: { scope: string }; revision: string };
      expect(e.id).toBe(data.position);
      expect(e.event).toBe(data.type);
      expect(data.metadata.scope).toBe('alice');
      expect(typeof data.revision).toBe('string');
    }
    const resumeAt = first[2]!.id!;
    const resumed = await readSse(
      await fetch(`${gw.url}/v1/events`, { headers: { ...headers, 'last-event-id': resumeAt } }),
      (events) => events.length >= 3,
    );
    expect(resumed.slice(0, 3).map((e) => e.id)).toEqual(first.slice(3, 6).map((e) => e.id));
    const viaQuery = await readSse(await fetch(`${gw.url}/v1/events?after=${resumeAt}`, { headers }), (events) => events.length >= 1);
    expect(viaQuery[0]!.id).toBe(first[3]!.id);
  });

  it('delivers live audit events to a follower that is waiting', async () => {
    await createEnvironment(gw, tokens.bob, 'bob head');
    const seen = await readSse(await fetch(`${gw.url}/v1/events`, { headers: gw.headers(tokens.bob) }), (events) =>
      events.some((e) => e.data.includes('bob head')),
    );
    const live = readSse(
      await fetch(`${gw.url}/v1/events`, { headers: { ...gw.headers(tokens.bob), 'last-event-id': seen.at(-1)!.id! } }),
      (events) => events.length >= 1,
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    await createEnvironment(gw, tokens.bob, 'bob live');
    const [event] = await live;
    expect(JSON.parse(event!.data)).toMatchObject({ type: 'environment.defined', data: { name: 'bob live' } });
  });
});

describe('shutdown', () => {
  it('closes WebSockets with 1001, ends SSE responses and answers new requests with unavailable', async () => {
    const own = await startGateway();
    try {
      const environment = await createEnvironment(own);
      const record = await submit(own, environment, ['emit', '1000', '60000']);
      const ws = new WebSocket(`${own.url.replace('http', 'ws')}/v1/executions/${record.id}/stream`, { headers: own.headers() });
      await new Promise((resolve) => ws.once('open', resolve));
      const closed = new Promise<number>((resolve) => ws.once('close', resolve));
      const sse = await fetch(`${own.url}/v1/executions/${record.id}/events`, { headers: own.headers() });
      const sseDone = sse.text();
      await own.gateway.close();
      expect(await closed).toBe(1001);
      await sseDone;
      const refused = await fetch(`${own.url}/v1/capabilities`, { headers: own.headers() });
      expect(refused.status).toBe(503);
      expect(await refused.json()).toMatchObject({ error: { code: 'unavailable' } });
      expect(own.api.cancelCalls).toBe(0);
    } finally {
      await own.close();
    }
  });
});
