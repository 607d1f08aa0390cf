/**
 * A descriptor the server's parent leaked (open without close-on-exec) would be handed on by libuv and bwrap to every
 * command: a tenant holding a directory of the host's reads through it (/proc/self/fd/N/…) past its sandbox's view,
 * and one holding a socket talks to whatever is at its other end. The server here is started as such a parent
 * would: fd 40 a host directory the sandbox does not show, fd 41 a socket back to this test. A contained command of
 * alice's, plain (the supervisor's first and the sandbox made ahead of need) and on a terminal, finds neither: it
 * reads no secret and writes nothing to the socket. Needs bwrap (skipped visibly without it).
 */
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync, constants } from 'node:fs';
import type { Readable } from 'node:stream';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { createNamed, run } from '../e2e/content-client.ts';
import { bwrap } from './native-sandbox-fixture.ts';

/** Where the server gets the host directory; the socket is the next. */
const LEAKED_DIR = 40;

// Every descriptor the command holds: its target, what it reads as a directory, and a forged line written to it.
const PROBE = [
  'for f in /proc/self/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] || continue',
  '  echo "fd $n -> $(readlink "$f")"; cat "$f/secret" 2>/dev/null; (echo forged >"$f") 2>/dev/null && echo "wrote $n"',
  'done; echo probed',
].join('\n');

describe.skipIf(!bwrap)("a contained command holds nothing the server's parent leaked", () => {
  let root: string;
  let server: BerthServer;
  let env: string;
  const received: Buffer[] = [];

  beforeAll(async () => {
    root = mkdtempSync('/var/tmp/berth-leak-');
    const hidden = join(root, 'hidden');
    mkdirSync(hidden, { mode: 0o755 });
    writeFileSync(join(hidden, 'secret'), 'leaked-host-secret\n', { mode: 0o644 });
    const dir = openSync(hidden, constants.O_RDONLY | constants.O_DIRECTORY);
    // High numbers, as a leaky parent's are: Node marks low inherited ones (3, 4) close-on-exec itself.
    const inherit: (number | 'pipe' | 'ignore')[] = Array.from({ length: LEAKED_DIR - 3 }, () => 'ignore');
    server = await startServer([], {}, [...inherit, dir, 'pipe']);
    closeSync(dir);
    (server.process.child.stdio[LEAKED_DIR + 1] as Readable).on('data', (d: Buffer) => received.push(d));
    env = (await createNamed(server, 'Leak', tokens.alice, { contain: true, network: 'none' })).id;
  }, 120_000);
  afterAll(async () => {
    await server?.close();
    rmSync(root, { recursive: true, force: true });
  });

  it('neither reads the host directory nor writes to the socket, on a fresh sandbox and on the one made ahead of need', async () => {
    for (let i = 0; i < 3; i++) {
      const { record, stdout } = await run(server, env, PROBE);
      expect(record).toMatchObject({ status: 'exited', exitCode: 0 });
      expect(stdout).toContain('probed');
      expect(stdout).not.toContain('leaked-host-secret');
      expect(stdout).not.toMatch(/^fd \d+ -> (socket|\/var\/tmp)/m);
    }
    expect(Buffer.concat(received).toString()).toBe('');
  });

  it('nor does a command on a terminal', async () => {
    const accepted = await submit(server, env, PROBE, { pty: { cols: 120, rows: 40 } });
    expect(await finished(server, accepted.id)).toMatchObject({ status: 'exited', exitCode: 0 });
    const screen = await (await server.call(`/v1/executions/${accepted.id}/output?stream=pty`)).text();
    expect(screen).toContain('probed');
    expect(screen).not.toContain('leaked-host-secret');
    expect(screen).not.toMatch(/fd \d+ -> (socket|\/var\/tmp)/);
    expect(Buffer.concat(received).toString()).toBe('');
  });
});
