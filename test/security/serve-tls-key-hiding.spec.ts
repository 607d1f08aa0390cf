/**
 * `berth serve --tls-cert/--tls-key`: the gateway's private key is the server's identity to every client and to the
 * runtimes that send their callers here (owned_elsewhere answers name this URL). It is a server secret like the
 * tokens file (DESIGN §13): a member's contained command must not read it. A non-root server's contained commands run
 * as its own uid, so its 0600 key is readable by them unless it is hidden; here the key is made readable by anyone
 * (what the server's uid sees of its own 0600 file) in a directory the sandbox shows, outside its private /tmp.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverEnv, tokens } from '../e2e/berth-server.ts';
import { selfSigned } from '../fixtures/self-signed.ts';
import { spawnBerth, type Running } from '../integration/cli-process.ts';
import { bwrap } from './native-sandbox-fixture.ts';

describe.skipIf(!bwrap)('the gateway\'s TLS key and a member\'s contained command', () => {
  let root: string;
  let child: Running;
  let base: URL;
  let ca: Buffer;
  let keyPath: string;

  const call = (path: string, body?: unknown, token = tokens.alice): Promise<{ status: number; json: any }> =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const req = https.request(
        new URL(path, base),
        { method: payload ? 'POST' : 'GET', ca, headers: { authorization: `Bearer ${token}`, ...(payload ? { 'content-type': 'application/json' } : {}) } },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (p: Buffer) => parts.push(p));
          res.on('end', () => {
            const text = Buffer.concat(parts).toString();
            resolve({ status: res.statusCode!, json: text ? JSON.parse(text) : undefined });
          });
        },
      );
      req.on('error', reject);
      req.end(payload);
    });

  beforeAll(async () => {
    root = mkdtempSync('/var/tmp/berth-serve-tls-');
    chmodSync(root, 0o755);
    const tls = selfSigned(root);
    keyPath = tls.keyPath;
    chmodSync(keyPath, 0o644);
    ca = readFileSync(tls.certPath);
    const dataDir = join(root, 'data');
    writeFileSync(join(root, 'tokens.json'), JSON.stringify([{ token: tokens.alice, scope: 'alice', role: 'member' }]), { mode: 0o600 });
    child = spawnBerth(['serve', '--data-dir', dataDir, '--port', '0', '--tls-cert', tls.certPath, '--tls-key', keyPath], serverEnv(dataDir, { BERTH_DOCKER: '0' }));
    const line = await child.waitForLine(/^Berth listening on https:\/\//, 60_000);
    base = new URL(line.replace('Berth listening on ', ''));
  }, 120_000);

  afterAll(async () => {
    await child?.stop('SIGKILL');
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('cannot read it, even where its file mode would let it', async () => {
    const env = await call('/v1/environments', { name: 'tls key probe', profile: {} });
    expect(env.status).toBe(201);
    const key = readFileSync(keyPath, 'utf8');
    const submitted = await call('/v1/executions', {
      operationId: 'tls-key-probe',
      environment: env.json.id,
      command: ['/bin/sh', '-c', `cat ${keyPath} 2>/dev/null; echo read-$?`],
    });
    expect(submitted.status).toBeLessThan(300);
    let record: any;
    for (;;) {
      record = (await call(`/v1/executions/${submitted.json.id}?waitMs=20000`)).json;
      if (['exited', 'cancelled', 'failed', 'unknown'].includes(record.status)) break;
    }
    expect(record.status).toBe('exited');
    const out = await new Promise<string>((resolve, reject) => {
      https
        .get(new URL(`/v1/executions/${submitted.json.id}/output?stream=stdout`, base), { ca, headers: { authorization: `Bearer ${tokens.alice}` } }, (res) => {
          const parts: Buffer[] = [];
          res.on('data', (p: Buffer) => parts.push(p));
          res.on('end', () => resolve(Buffer.concat(parts).toString()));
        })
        .on('error', reject);
    });
    expect(out).not.toContain('PRIVATE KEY');
    expect(out).not.toContain(key.split('\n')[1]);
    expect(out.trim().split('\n').at(-1)).not.toBe('read-0');
  });
});
