/**
 * Streaming through the gateway in this process over the real runtime, for what needs small limits or the gateway
 * itself: stdin, resize and end frames (and refused ones) on a real `cat`, upgrades refused before the handshake,
 * SSE following every stream and sending heartbeats, a live audit follower, and shutdown (1001, unavailable).
 * Byte-identical output, resume by cursor, 1013 and Last-Event-ID against `berth serve` are in test/e2e.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { expectedOutput } from '../fixtures/emit-bytes.mjs';
import { rawConnect as connect } from '../fixtures/raw-ws-client.ts';
import { outputBytes, readSse } from '../fixtures/sse-reader.ts';
import { createEnvironment, emit, startGateway, submit, tokens, type RunningGateway } from './gateway-fixture.ts';

let gw: RunningGateway;
let env: string;

beforeAll(async () => {
  gw = await startGateway({ limits: { chunkBytes: 64 * 1024, heartbeatMs: 100 } });
  env = await createEnvironment(gw);
});
afterAll(() => gw.close());

const rawConnect = (path: string, headers: Record<string, string> = gw.headers()) => connect(`${gw.url.replace('http', 'ws')}${path}`, headers);

describe('execution WebSocket', () => {
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
    expect(s.joined('stdout').equals(Buffer.concat([Buffer.from('hello '), Buffer.from([0, 255, 10])]))).toBe(true);
    const errors = s.texts.filter((t) => t.type === 'error') as { error: { code: string } }[];
    expect(errors.map((e) => e.error.code)).toEqual(['invalid_request', 'invalid_request']);
    expect(s.texts.at(-1)).toMatchObject({ type: 'status', status: 'exited', exitCode: 0 });
  });

  it('refuses bad upgrades as plain HTTP before the handshake, and logs no token', async () => {
    const record = await submit(gw, env, ['echo', 'hi']);
    const path = `/v1/executions/${record.id}/stream`;
    await expect(rawConnect(path, gw.headers('not-a-token-at-all-xx')).opened).rejects.toThrow('HTTP 401');
    await expect(rawConnect(`${path}?stdout=-4`).opened).rejects.toThrow('HTTP 400');
    await expect(rawConnect(`${path}?bogus=1`).opened).rejects.toThrow('HTTP 400');
    await expect(rawConnect('/v1/capabilities').opened).rejects.toThrow('HTTP 400');
    await expect(rawConnect('/v1/nowhere').opened).rejects.toThrow('HTTP 404');
    const viaQuery = rawConnect(`${path}?token=${tokens.alice}`, {});
    expect(await viaQuery.closed).toBe(1000);
    expect(viaQuery.joined('stdout').toString()).toBe('hi\n');
    expect(gw.logs.join('')).not.toContain(tokens.alice);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
  });
});

describe('SSE', () => {
  it('follows every stream by default and ends with the terminal status', async () => {
    const record = await submit(gw, env, emit(8000, 50));
    const events = await readSse(await fetch(`${gw.url}/v1/executions/${record.id}/events`, { headers: gw.headers() }), () => false);
    expect(outputBytes(events, 'stdout').equals(expectedOutput('stdout', 8000))).toBe(true);
    expect(outputBytes(events, 'stderr').equals(expectedOutput('stderr', 1000))).toBe(true);
    expect(events.filter((e) => e.event === 'status').map((e) => JSON.parse(e.data).status).at(-1)).toBe('exited');
  });

  it('sends heartbeat comments while nothing happens', async () => {
    const record = await submit(gw, env, emit(10, 2000));
    const response = await fetch(`${gw.url}/v1/executions/${record.id}/events?stream=stdout&stdout=10`, { headers: gw.headers() });
    const reader = response.body!.getReader();
    let text = '';
    const until = Date.now() + 3000;
    while (!text.includes(': heartbeat\n\n') && Date.now() < until) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    expect(text).toContain(': heartbeat\n\n');
    expect(text).not.toContain('event: output'); // started at the end of stdout: nothing to send but heartbeats
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
    expect(JSON.parse(event!.data)).toMatchObject({ stream: expect.stringMatching(/^environment-/), data: { name: 'bob live' } });
  });
});

describe('shutdown', () => {
  it('closes WebSockets with 1001, ends SSE responses and answers new requests with unavailable, cancelling nothing', async () => {
    const own = await startGateway();
    try {
      const environment = await createEnvironment(own);
      const record = await submit(own, environment, emit(1000, 3000));
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
      expect(await own.cancelRequests(record.id)).toBe(0);
      const done = await own.berth.api.getExecution({ scope: 'alice', role: 'member' }, record.id, 20_000);
      expect(done).toMatchObject({ status: 'exited', exitCode: 0 });
    } finally {
      await own.close();
    }
  });
});
