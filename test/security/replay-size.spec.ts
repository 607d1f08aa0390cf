/**
 * Stream replay and the timeline against a member who makes one of its actors' contexts grow (DESIGN §13: nobody
 * exhausts the server for others). Each replay step carried the changed context values whole, before and after, so a
 * context that grows with its stream made the output quadratic: a turn lists every command it admitted, and after
 * 1,400 commands in one turn (a minute's work for a member) a 500-step timeline page was 200 MB (server at 1.9 GB)
 * and `GET /v1/streams/turn-…` failed with a 500 (`Invalid string length`) after taking 1.1 GB. Against a real
 * `berth serve`: a step's diff shows a value past 4,096 characters as its kind and size (`$omitted`), so a page and
 * the full replay grow linearly with the stream, and short values are still shown whole.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, startServer, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';

const COMMANDS = 300;
let server: BerthServer;
let turnStream: string;

beforeAll(async () => {
  server = await startServer();
  const environment = await createEnvironment(server);
  const workspace = (await server.json('/v1/workspaces', { body: { name: 'grow' } })).id;
  const session = (await server.json('/v1/sessions', { body: { environmentId: environment, workspaceId: workspace } })).id;
  const turn = (await server.json(`/v1/sessions/${session}/turns`, { body: {} })).id;
  turnStream = `turn-${turn}`;
  // Six at a time (the scope may run eight), each waited for to its end.
  for (let i = 0; i < COMMANDS; i += 6) {
    const batch = Array.from({ length: Math.min(6, COMMANDS - i) }, (_, j) =>
      server.json('/v1/executions', { body: { operationId: `grow-${i + j}`, session, turn, command: ['true'] } }),
    );
    for (const record of await Promise.all(batch)) {
      while (!['exited', 'failed', 'cancelled', 'unknown'].includes((await server.json(`/v1/executions/${record.id}?waitMs=20000`)).status));
    }
  }
  // The turn records a command's end after the execution says it ended: wait for the last one's (2 events a command).
  await waitFor(() => server.json(`/v1/streams/${turnStream}/timeline?limit=1`), {
    what: `the turn's ${2 * COMMANDS} events`,
    until: (page) => page.lastRevision >= 2 * COMMANDS - 1,
  });
}, 300_000);
afterAll(() => server?.close());

async function sized(path: string): Promise<{ bytes: number; body: any }> {
  const response = await server.call(path);
  const text = await response.text();
  expect([path, response.status]).toEqual([path, 200]);
  return { bytes: Buffer.byteLength(text), body: JSON.parse(text) };
}

describe('replay and timeline of a context that grows with its stream', () => {
  it('answers the full replay in a size linear in the stream', async () => {
    const { bytes, body } = await sized(`/v1/streams/${turnStream}`);
    expect(body.length).toBeGreaterThanOrEqual(2 * COMMANDS); // admitted and recorded, per command
    // Before: about 45 KB a step here (27 MB), quadratic in the commands; now each step is its event and small diffs.
    expect(bytes / body.length).toBeLessThan(12 * 1024);
    const last = body.at(-1).contextDiff.executions;
    expect(last.after).toEqual({ $omitted: { type: 'array', items: COMMANDS, maxChars: 4096 } });
  });

  it('answers the last timeline page in a bounded size', async () => {
    const { body: head } = await sized(`/v1/streams/${turnStream}/timeline?limit=1`);
    const from = Math.max(0, head.lastRevision - 499);
    const { bytes, body } = await sized(`/v1/streams/${turnStream}/timeline?from=${from}&limit=500`);
    expect(body.steps.length).toBeGreaterThan(400);
    expect(bytes).toBeLessThan(6 * 1024 * 1024); // was about 45 MB
  });

  it('still shows a short value whole', async () => {
    const { body } = await sized(`/v1/streams/${turnStream}/timeline?limit=3`);
    const admitted = body.steps.find((s: any) => s.event.type === 'turn.execution_admitted');
    expect(admitted.contextDiff.executions.before).toEqual([]);
    expect(admitted.contextDiff.executions.after).toEqual([expect.objectContaining({ executionId: admitted.event.data.executionId, recorded: false })]);
  });
});
