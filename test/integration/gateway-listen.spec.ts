/**
 * Listener options over real sockets: a Unix socket (mode 0600, stale file replaced, live one refused) and HTTPS
 * with a certificate made by openssl, WebSocket output included. Over the in-test FakeRuntimeApi (see its header).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { buildGateway, type Gateway } from '../../src/gateway/app.ts';
import { createTokenAuth } from '../../src/gateway/auth.ts';
import { listen } from '../../src/gateway/listen.ts';
import { FakeRuntimeApi, expectedOutput } from '../unit/gateway/fake-runtime-api.ts';

const token = 'listen-admin-token-0123456789';
let dir: string;
let gateway: Gateway;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-listen-'));
  gateway = buildGateway({ api: new FakeRuntimeApi(), auth: createTokenAuth({ adminToken: token }) });
});
afterAll(async () => {
  await gateway.close();
  rmSync(dir, { recursive: true, force: true });
});

function request(options: http.RequestOptions & { ca?: Buffer }, body?: string, secure = false): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request({ ...options, headers: { authorization: `Bearer ${token}`, ...options.headers } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (p: Buffer) => parts.push(p));
      res.on('end', () => resolve({ status: res.statusCode!, text: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function followOutput(url: string, ca?: Buffer): Promise<Buffer> {
  const parts: Buffer[] = [];
  const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` }, ca });
  ws.on('message', (data: Buffer, isBinary) => isBinary && data[0] === 1 && parts.push(Buffer.from(data.subarray(9))));
  const code = await new Promise<number>((resolve, reject) => {
    ws.on('close', resolve);
    ws.on('error', reject);
  });
  expect(code).toBe(1000);
  return Buffer.concat(parts);
}

const json = { 'content-type': 'application/json' };

describe('listen', () => {
  it('serves over a Unix socket only its owner may open, replacing a stale socket file', async () => {
    const socketPath = join(dir, 'berth.sock');
    const stale = net.createServer().listen(socketPath);
    await new Promise((resolve) => stale.once('listening', resolve));
    await expect(listen(gateway, { socketPath })).rejects.toThrow(/in use/);
    // Simulate a crashed server: the file stays, nobody answers.
    stale.close();
    writeFileSync(join(dir, 'not-a-socket'), '');
    await expect(listen(gateway, { socketPath: join(dir, 'not-a-socket') })).rejects.toThrow(/not a socket/);

    const listener = await listen(gateway, { socketPath });
    try {
      expect(listener.url).toBe(`http+unix://${encodeURIComponent(socketPath)}`);
      expect(statSync(socketPath).mode & 0o777).toBe(0o600);
      expect((await request({ socketPath, path: '/healthz' })).status).toBe(200);
      const env = await request({ socketPath, path: '/v1/environments', method: 'POST', headers: json }, '{"name":"unix"}');
      expect(env.status).toBe(201);
      const id = JSON.parse(env.text).id as string;
      const body = JSON.stringify({ operationId: 'u1', environment: id, command: ['emit', '70000', '30'] });
      const exec = JSON.parse((await request({ socketPath, path: '/v1/executions', method: 'POST', headers: json }, body)).text);
      const bytes = await followOutput(`ws+unix://${socketPath}:/v1/executions/${exec.id}/stream`);
      expect(bytes.equals(expectedOutput('stdout', 70000))).toBe(true);
    } finally {
      await listener.close();
    }
  });

  it('serves HTTPS and WSS with the configured certificate', async () => {
    const certPath = join(dir, 'cert.pem');
    const keyPath = join(dir, 'key.pem');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyPath, '-out', certPath, '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1',
    ], { stdio: 'ignore' });
    const ca = readFileSync(certPath);
    const listener = await listen(gateway, { host: '127.0.0.1', port: 0 }, { certPath, keyPath });
    try {
      const url = new URL(listener.url);
      expect(url.protocol).toBe('https:');
      const base = { host: '127.0.0.1', port: Number(url.port), ca };
      expect((await request({ ...base, path: '/v1/capabilities' }, undefined, true)).status).toBe(200);
      const unauthorized = await request({ ...base, path: '/v1/capabilities', headers: { authorization: '' } }, undefined, true);
      expect(unauthorized.status).toBe(401);
      const env = JSON.parse((await request({ ...base, path: '/v1/environments', method: 'POST', headers: json }, '{"name":"tls"}', true)).text);
      const body = JSON.stringify({ operationId: 't1', environment: env.id, command: ['emit', '50000', '30'] });
      const exec = JSON.parse((await request({ ...base, path: '/v1/executions', method: 'POST', headers: json }, body, true)).text);
      const bytes = await followOutput(`wss://127.0.0.1:${url.port}/v1/executions/${exec.id}/stream`, ca);
      expect(bytes.equals(expectedOutput('stdout', 50000))).toBe(true);
    } finally {
      await listener.close();
    }
  });
});
