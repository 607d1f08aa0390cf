/**
 * Tokens in URLs (issue 10, finding 7): `?tok%65n=<token>` authenticated (query names were decoded) while the log
 * redaction matched only a literal `token=`, so the token was logged in clear. Against a real `berth serve` logging
 * at debug: only the literal `token` query name authenticates, and only on the streaming routes; then, after
 * successful, refused and streaming requests carrying the token in every place and encoding we could think of, the
 * server's whole output (stdout and stderr) holds no token in clear, percent-encoded or base64 form.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { rawConnect } from '../fixtures/raw-ws-client.ts';
import { readSse } from '../fixtures/sse-reader.ts';
import { openStalled } from './stalled-client.ts';

let server: BerthServer;
let execution: string;
const secret = tokens.alice;
const percentAll = (text: string) => [...Buffer.from(text)].map((b) => `%${b.toString(16).padStart(2, '0')}`).join('');
const b64 = Buffer.from(secret).toString('base64');
const b64url = Buffer.from(secret).toString('base64url');

beforeAll(async () => {
  server = await startServer([], { BERTH_LOG_LEVEL: 'debug' });
  const env = await createEnvironment(server);
  execution = (await submit(server, env, ['echo', 'hello'])).id;
  await finished(server, execution);
});
afterAll(() => server?.close());

/** The status of a request without an Authorization header (the body is read, so the log line is written). */
async function statusOf(path: string, headers: Record<string, string> = {}): Promise<number> {
  const response = await server.call(path, { token: null, headers });
  await response.arrayBuffer();
  return response.status;
}

describe('the query token', () => {
  const encodedNames = ['tok%65n', '%74oken', '%74%6f%6b%65%6e', 'TOKEN', 'Token', 'token[]', 'token%5B%5D', 'tok%2565n', '%2574oken', 'token%00', ' token'];

  it('authenticates only under the literal name `token`, on streaming routes only', async () => {
    for (const name of encodedNames) {
      const events = await statusOf(`/v1/executions/${execution}/events?${name}=${secret}`);
      expect([name, events]).toEqual([name, 401]);
      const feed = await statusOf(`/v1/events?${name}=${secret}`);
      expect([name, feed]).toEqual([name, 401]);
      await expect(rawConnect(`${server.url.replace('http', 'ws')}/v1/executions/${execution}/stream?${name}=${secret}`, {}).opened).rejects.toThrow('HTTP 401');
    }
    // Twice is ambiguous, not "the first one".
    expect(await statusOf(`/v1/events?token=${secret}&token=${secret}`)).toBe(401);
    // Not a streaming route: no query token at all.
    expect(await statusOf(`/v1/executions/${execution}?token=${secret}`)).toBe(401);
    expect(await statusOf(`/v1/environments?token=${secret}`)).toBe(401);
    // The literal name works where it should (a value may be percent-encoded, as URLSearchParams may do).
    const sse = await server.call(`/v1/executions/${execution}/events?token=${percentAll(secret)}`, { token: null });
    expect(sse.status).toBe(200);
    expect((await readSse(sse, () => false)).at(-1)?.event).toBe('status');
    const ws = rawConnect(`${server.url.replace('http', 'ws')}/v1/executions/${execution}/stream?token=${secret}`, {});
    expect(await ws.closed).toBe(1000);
  });
});

describe('the server log', () => {
  it('never holds a token, whatever request carried it and however it was encoded', async () => {
    const ws = `${server.url.replace('http', 'ws')}/v1/executions/${execution}/stream`;
    const carriers = [
      `/v1/executions/${execution}/events?token=${secret}`,
      `/v1/executions/${execution}/events?tok%65n=${secret}`,
      `/v1/executions/${execution}/events?%74oken=${encodeURIComponent(secret)}`,
      `/v1/executions/${execution}/events?TOKEN=${percentAll(secret)}`,
      `/v1/executions/${execution}/events?token[]=${secret}`,
      `/v1/executions/${execution}/events?token=${encodeURIComponent(percentAll(secret))}`,
      `/v1/executions/${execution}/events?stdout=0&x=${secret}`,
      `/v1/executions/${execution}/events?${secret}`,
      `/v1/events?after=abc&token=${secret}`,
      `/v1/executions/${secret}`,
      `/v1/executions/${percentAll(secret)}/output`,
      `/v1/${b64}`,
      `/v1/executions?x=${b64url}`,
      `/v1/no-such-route/${secret}?token=${secret}`,
      `/v1/executions/${execution}?waitMs=abc&token=${secret}`,
    ];
    for (const path of carriers) {
      await statusOf(path); // refused: no header
      await statusOf(path, { authorization: `Bearer ${secret}` }); // accepted, or refused for the path
      await statusOf(path, { authorization: `Bearer ${secret}x` }); // an unknown token beside the known one
    }
    await statusOf('/v1/environments', { authorization: `Basic ${Buffer.from(`user:${secret}`).toString('base64')}` });
    // Streaming requests that authenticate by the query token, complete and stalled ones.
    const done = rawConnect(`${ws}?token=${secret}`, {});
    expect(await done.closed).toBe(1000);
    const stalled = await openStalled(server.url, `/v1/events?token=${secret}`, 'sse');
    expect(stalled.status).toBe(200);
    stalled.socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await server.stop('SIGTERM'); // flushes the logs

    const output = `${server.process.lines.join('\n')}\n${server.process.stderr()}`;
    expect(output).toContain('"url":"/v1/executions/'); // the request lines are there, only redacted
    const forms = [secret, percentAll(secret), percentAll(secret).toUpperCase(), encodeURIComponent(percentAll(secret)), b64, b64url, b64.replace(/=+$/, '')];
    for (const form of forms) expect([form, output.includes(form)]).toEqual([form, false]);
  });
});
