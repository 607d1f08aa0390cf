/**
 * A Docker provider whose engine does not answer, produced for real: a socket path where nothing listens, and a
 * listener that accepts and never answers (a hung engine). Creating an environment still works; an acquire or an
 * execution fails within 2 s with `provider_unavailable`, its allocation ends confirmed absent (nothing was sent),
 * nothing is left acquiring or releasing, and the environment can be deleted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ErrorCode } from '../../schemas/errors.ts';
import type { Berth } from '../../src/runtime/berth.ts';
import { admin, startTestBerth } from './environments-berth.ts';
import { gathered } from '../../src/runtime/core/stream-replay.ts';

let dir: string;
let berth: Berth | undefined;
let hung: { server: Server; sockets: Set<Socket> } | undefined;

/** A Unix socket that accepts every connection and never writes a byte. */
async function listenWithoutAnswering(path: string): Promise<{ server: Server; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(path, resolve));
  return { server, sockets };
}

/** The error code a call fails with, and how long it took to fail. */
async function failure(call: () => Promise<unknown>): Promise<{ code: ErrorCode | undefined; ms: number }> {
  const started = performance.now();
  const error = await call().then(
    () => undefined,
    (e: { code?: ErrorCode; detail?: unknown }) => e,
  );
  return { code: error?.code, ms: performance.now() - started };
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-no-engine-'));
});
afterEach(async () => {
  await berth?.stop();
  berth = undefined;
  for (const s of hung?.sockets ?? []) s.destroy();
  hung?.server.close();
  hung = undefined;
  rmSync(dir, { recursive: true, force: true });
});

describe('a Docker environment whose engine does not answer', () => {
  for (const fault of ['nothing listens on the socket', 'the engine accepts and never answers'] as const) {
    it(`should refuse acquire and execution within 2 s with provider_unavailable, leave nothing under way, and delete (${fault})`, async () => {
      const socketPath = join(dir, 'engine.sock');
      if (fault === 'the engine accepts and never answers') hung = await listenWithoutAnswering(socketPath);
      berth = await startTestBerth(dir, { docker: { endpoint: { socketPath } } });
      const env = await berth.api.createEnvironment(admin, { name: 'no engine', profile: { provider: 'docker' } });
      expect(env).toMatchObject({ state: 'idle', availability: 'unavailable' });

      const acquire = await failure(() => berth!.api.acquire(admin, env.id));
      expect(acquire.code).toBe('provider_unavailable');
      expect(acquire.ms).toBeLessThan(2_000);
      const run = await failure(() => berth!.api.submitExecution(admin, { operationId: 'no-engine-1', environment: env.id, command: ['true'] }));
      expect(run.code).toBe('provider_unavailable');
      expect(run.ms).toBeLessThan(2_000);

      // Each attempt's allocation ended confirmed absent (its only call sent nothing): none is acquiring, unknown or
      // releasing, and the environment is idle again.
      const view = await berth.api.getEnvironment(admin, env.id);
      expect(view).toMatchObject({ state: 'idle', allocation: null });
      expect(await berth.api.activeAllocations(admin)).toEqual({ items: [] });
      const requested = (await gathered(await berth.api.replay(admin, `environment-${env.id}`)))
        .map((step) => step.event)
        .filter((e) => e.type === 'environment.acquisition_requested');
      expect(requested).toHaveLength(2);
      for (const e of requested) {
        const allocationId = (e.data as { allocationId: string }).allocationId;
        expect((await berth.api.environments.allocationView(allocationId)).state).toBe('failed');
      }

      await berth.api.deleteEnvironment(admin, env.id);
      expect((await failure(() => berth!.api.getEnvironment(admin, env.id))).code).toBe('environment_not_found');
    });
  }
});
