/**
 * The Docker engine a server drives is root on its host: a contained command must never reach it. The well-known
 * socket paths are hidden from every sandbox; so must be the one the server is configured with (DOCKER_HOST), wherever
 * it lies. Here the configured socket is a relay to the test engine at a path outside the sandbox's private /tmp,
 * connectable by anyone (as a non-root server's own socket, a rootless engine's `/run/user/<uid>/docker.sock`, always
 * is for its contained commands, which run as the server's uid).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { createNamed, run } from '../e2e/content-client.ts';
import { dockerAvailable, dockerEndpoint } from '../integration/docker-env.ts';
import { bwrap } from './native-sandbox-fixture.ts';

const engineSocket = dockerAvailable && 'socketPath' in dockerEndpoint ? dockerEndpoint.socketPath : undefined;

describe.skipIf(!bwrap || !engineSocket)('a contained command never reaches the configured Docker engine', () => {
  let root: string;
  let relay: net.Server;
  let server: BerthServer;
  let relayed = 0;

  beforeAll(async () => {
    root = mkdtempSync('/var/tmp/berth-engine-');
    chmodSync(root, 0o755);
    const socket = join(root, 'docker.sock');
    relay = net.createServer((client) => {
      relayed++;
      const engine = net.connect(engineSocket!);
      client.pipe(engine).pipe(client);
      const end = () => {
        client.destroy();
        engine.destroy();
      };
      client.on('error', end);
      engine.on('error', end);
    });
    await new Promise<void>((resolve) => relay.listen(socket, resolve));
    chmodSync(socket, 0o666);
    server = await startServer([], { DOCKER_HOST: `unix://${socket}` });
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    relay?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('cannot connect to it, even where its file mode would let it', async () => {
    const env = await createNamed(server, 'Engine Probe', tokens.alice, { contain: true });
    const socket = join(root, 'docker.sock');
    const before = relayed;
    const { stdout } = await run(server, env.id, `curl -s --max-time 5 --unix-socket ${socket} http://engine/version | head -c 40; echo; test -S ${socket} && echo socket`);
    expect(stdout.trim()).toBe('');
    expect(relayed).toBe(before);
  });
});
