/**
 * Following an execution that checkpoints a workspace view (a command in a turn, here a sandbox's on a Docker machine)
 * against a real `berth serve` (DESIGN §13): over the WebSocket and over SSE, a member's follow ends by its deadline
 * and /healthz keeps answering meanwhile. A follower at the `checkpointing` step once woke at once forever without a
 * macrotask between: the whole server stopped, the checkpoint it waited for too.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Berth, type Sandbox } from '../../src/client/index.ts';
import { startServer, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { dockerAvailable } from '../integration/docker-env.ts';

const FOLLOW_DEADLINE_MS = 20_000;
const HEALTH_TIMEOUT_MS = 2_000;

let server: BerthServer;
let sandbox: Sandbox;

beforeAll(async () => {
  if (!dockerAvailable) return;
  server = await startServer();
  const berth = await Berth.connect({ url: server.url, token: tokens.alice });
  sandbox = await berth.sandboxes.create({ profile: { provider: 'docker', image: 'berth-base:latest' } });
}, 120_000);
afterAll(async () => {
  // A hung server answers no kill: the server's close removes it then.
  await Promise.race([sandbox?.kill().catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
  await server?.close();
});

/** Runs `follow` with a deadline while /healthz is asked every 100 ms; answers the follow's result and the probes. */
async function whileProbingHealth<T>(follow: () => Promise<T>): Promise<{ result: T; probes: (number | string)[] }> {
  const probes: (number | string)[] = [];
  let following = true;
  const probing = (async () => {
    while (following) {
      const response = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) }).catch((e: Error) => e.name);
      probes.push(typeof response === 'string' ? response : response.status);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const deadline = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the follow passed its deadline')), FOLLOW_DEADLINE_MS));
  try {
    return { result: await Promise.race([follow(), deadline]), probes };
  } finally {
    following = false;
    await probing;
  }
}

describe.skipIf(!dockerAvailable)('following a command that checkpoints its workspace view (docker)', () => {
  it('should end a WebSocket follow by its deadline while /healthz keeps answering', async () => {
    const { result, probes } = await whileProbingHealth(() => sandbox.run('echo hi > note.txt; echo hi'));
    expect(result).toMatchObject({ stdout: 'hi\n', exitCode: 0 });
    expect(probes.length).toBeGreaterThan(0);
    expect(probes.every((p) => p === 200)).toBe(true);
  }, 60_000);

  it('should end an SSE follow by its deadline while /healthz keeps answering', async () => {
    const record = await server.json('/v1/executions', {
      body: { operationId: `sse-${Date.now()}`, lease: sandbox.name, turn: sandbox.turn.id, command: 'echo hi > note.txt; echo hi' },
    });
    const { result, probes } = await whileProbingHealth(async () => (await server.call(`/v1/executions/${record.id}/events`)).text());
    expect(result).toContain('event: status');
    expect(result).toMatch(/"status":"exited"/);
    expect(probes.every((p) => p === 200)).toBe(true);
  }, 60_000);
});

if (!dockerAvailable) console.log('skipped: following a checkpointing command (no Docker engine)');
