/**
 * `berth serve` listener options as a real child process: a Unix socket only its owner may open (a stale file from a
 * killed server is replaced, a live one refused), HTTPS and WSS with a certificate made by openssl, TCP and socket
 * together, and a non-loopback host refused without TLS.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { berth, spawnBerth, type Running } from '../integration/cli-process.ts';
import { serverEnv, tokens } from './berth-server.ts';
import { selfSigned } from '../fixtures/self-signed.ts';

let dir: string;
const children: Running[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-e2e-listen-'));
  writeFileSync(join(dir, 'tokens.json'), '[]');
});
afterEach(async () => {
  for (const child of children.splice(0)) await child.stop('SIGKILL');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const envFor = (name: string) => serverEnv(join(dir, name, 'data'), { BERTH_TOKENS_FILE: join(dir, 'tokens.json') });
const serveArgs = (name: string, args: string[]) => ['serve', '--data-dir', join(dir, name, 'data'), ...args];

function serve(name: string, args: string[]): Running {
  const child = spawnBerth(serveArgs(name, args), envFor(name));
  children.push(child);
  return child;
}

function request(options: http.RequestOptions & { ca?: Buffer }, body?: string, secure = false): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const headers = { authorization: `Bearer ${tokens.admin}`, ...(body ? { 'content-type': 'application/json' } : {}), ...options.headers };
    const req = (secure ? https : http).request({ ...options, headers }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (p: Buffer) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function followStdout(url: string, ca?: Buffer): Promise<string> {
  const parts: Buffer[] = [];
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${tokens.admin}` }, ca });
  ws.on('message', (data: Buffer, isBinary) => isBinary && data[0] === 1 && parts.push(Buffer.from(data.subarray(9))));
  const code = await new Promise<number>((resolve, reject) => {
    ws.on('close', resolve);
    ws.on('error', reject);
  });
  expect(code).toBe(1000);
  return Buffer.concat(parts).toString();
}

/** Creates an environment, runs `echo <word>` in it and follows its stdout over the WebSocket at `wsBase`. */
async function echoThrough(send: (path: string, body?: string) => Promise<{ status: number; text: string }>, wsBase: string, word: string, ca?: Buffer) {
  const env = await send('/v1/environments', JSON.stringify({ name: `listen ${word}` }));
  expect(env.status, env.text).toBe(201);
  const body = JSON.stringify({ operationId: `op-${word}`, environment: JSON.parse(env.text).id, command: ['echo', word] });
  const exec = await send('/v1/executions', body);
  expect(exec.status, exec.text).toBe(201);
  return followStdout(`${wsBase}/v1/executions/${JSON.parse(exec.text).id}/stream`, ca);
}

describe('berth serve listeners', () => {
  it('serves a Unix socket (mode 0600) instead of TCP, replaces a stale one and refuses one in use', async () => {
    const socketPath = join(dir, 'berth.sock');
    const first = serve('unix', ['--socket', socketPath]);
    const line = await first.waitForLine(/^Berth listening on /, 60_000);
    expect(line).toBe(`Berth listening on http+unix://${encodeURIComponent(socketPath)}`);
    expect(first.lines.filter((l) => l.startsWith('Berth listening on'))).toHaveLength(1); // no TCP listener
    expect(statSync(socketPath).mode & 0o777).toBe(0o600);
    const send = (path: string, body?: string) => request({ socketPath, path, method: body ? 'POST' : 'GET' }, body);
    expect((await send('/healthz')).status).toBe(200);
    expect(await echoThrough(send, `ws+unix://${socketPath}:`, 'unix')).toBe('unix\n');

    const rival = await berth(serveArgs('rival', ['--socket', socketPath]), envFor('rival'));
    expect(rival.code).toBe(1);
    expect(rival.stderr).toMatch(/in use by another server/);

    await first.stop('SIGKILL'); // leaves the socket file behind
    const second = serve('unix', ['--socket', socketPath]);
    await second.waitForLine(/^Berth listening on http\+unix:/, 60_000);
    expect((await send('/healthz')).status).toBe(200);
  });

  it('serves HTTPS and WSS with the configured certificate, and TCP next to a socket when a port is given', async () => {
    const { certPath, keyPath } = selfSigned(dir);
    const ca = readFileSync(certPath);
    const socketPath = join(dir, 'tls.sock');
    const child = serve('tls', ['--port', '0', '--socket', socketPath, '--tls-cert', certPath, '--tls-key', keyPath]);
    const line = await child.waitForLine(/^Berth listening on https:\/\//, 60_000);
    await child.waitForLine(/^Berth listening on https\+unix:/);
    const url = new URL(line.replace('Berth listening on ', ''));
    const base = { host: '127.0.0.1', port: Number(url.port), ca };
    expect((await request({ ...base, path: '/v1/capabilities' }, undefined, true)).status).toBe(200);
    expect((await request({ ...base, path: '/v1/capabilities', headers: { authorization: '' } }, undefined, true)).status).toBe(401);
    const send = (path: string, body?: string) => request({ ...base, path, method: body ? 'POST' : 'GET' }, body, true);
    expect(await echoThrough(send, `wss://127.0.0.1:${url.port}`, 'tls', ca)).toBe('tls\n');
    await expect(request({ host: '127.0.0.1', port: Number(url.port), path: '/healthz' })).rejects.toThrow(); // no plain HTTP
  });

  it('refuses a non-loopback host without TLS, and half a TLS configuration', async () => {
    const open = await berth(serveArgs('open', ['--host', '0.0.0.0']), envFor('open'));
    expect(open.code).toBe(2);
    expect(open.stderr).toMatch(/needs TLS/);
    const half = await berth(serveArgs('half', ['--tls-cert', 'x.pem']), envFor('half'));
    expect(half.code).toBe(2);
    expect(half.stderr).toMatch(/--tls-cert and --tls-key go together/);
  });
});
