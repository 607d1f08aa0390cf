/**
 * The control plane sends its host credential to whatever listens at the host's configured socket path. A socket in
 * a directory others may write (a sticky /tmp too) is a path anyone could listen at once the host is gone: the client
 * refuses it before anything is sent (`provider_unavailable`, reason `socket_directory_writable`). Here a squatter
 * listens at such a path and records what it is sent.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HostClient } from '../../src/providers/remote/host-client.ts';

describe('a host socket in a directory others may write', () => {
  let root: string;
  let squatter: http.Server;
  const seen: (string | undefined)[] = [];
  const socketIn = (dir: string) => join(root, dir, 'host.sock');
  /** A client's first call to a host named `name` at the socket in `dir`. */
  async function handshake(name: string, dir: string) {
    const client = new HostClient({ name, socketPath: socketIn(dir), credentialFile: join(root, 'credential') });
    try {
      return await client.handshake();
    } finally {
      client.close();
    }
  }

  beforeAll(async () => {
    root = mkdtempSync('/var/tmp/berth-host-socket-');
    writeFileSync(join(root, 'credential'), 'a-host-credential-that-must-stay-here\n', { mode: 0o600 });
    for (const [dir, mode] of [['shared', 0o1777], ['private', 0o755]] as const) {
      const d = join(root, dir);
      mkdirSync(d);
      chmodSync(d, mode);
    }
    // Answers as a host would, so that a client that sends gets an answer rather than an error.
    squatter = http.createServer((req, res) => {
      seen.push(req.headers.authorization);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ protocol: 1, incarnation: 'squatter', version: '0' }));
    });
    await new Promise<void>((resolve) => squatter.listen(socketIn('shared'), resolve));
  });
  afterAll(async () => {
    await new Promise((r) => squatter?.close(r));
    rmSync(root, { recursive: true, force: true });
  });

  it('is refused before the credential is sent', async () => {
    await expect(handshake('exposed', 'shared')).rejects.toMatchObject({ code: 'provider_unavailable', detail: { reason: 'socket_directory_writable', host: 'exposed' } });
    expect(seen).toEqual([]);
  });

  it('a directory only its owner writes is used (the host not listening yet: unreachable, nothing sent)', async () => {
    await expect(handshake('kept', 'private')).rejects.toMatchObject({ code: 'provider_unavailable', detail: { host: 'kept', cause: 'ENOENT' } });
  });
});
