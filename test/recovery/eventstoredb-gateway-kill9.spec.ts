/**
 * `berth serve --store esdb://…` over the EventStoreDB test server running in its own process: a command is
 * submitted and its output followed through the gateway, the Berth process is SIGKILLed mid-run, and a restart on the
 * same data directory and the same store recovers it: the command ran once, its output reads back whole, and the
 * execution ends exited, all from events the store kept.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { spawnEsdbServer, type EsdbProcess } from '../esdb-server/esdb-process.ts';
import { outputBytes, readSse } from '../fixtures/sse-reader.ts';
import { waitFor } from '../fixtures/wait-for.ts';

let store: EsdbProcess;
let server: BerthServer;
let scratch: string;

beforeAll(async () => {
  store = await spawnEsdbServer();
  server = await startServer(['--store', store.url]);
  scratch = mkdtempSync(join(tmpdir(), 'berth-esdb-kill9-'));
});
afterAll(async () => {
  await server?.close();
  await store?.stop();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('berth serve over the EventStoreDB test server, killed mid-run', () => {
  it('should recover the execution from the store: one run, whole output, exited', { timeout: 180_000 }, async () => {
    expect((await server.json('/healthz', { token: null })).store).toBe('eventstoredb');
    // The admin's commands run uncontained, so the marker file outside the data directory counts the runs.
    const environment = await createEnvironment(server, tokens.admin);
    const runs = join(scratch, 'runs.txt');
    const script = `echo run >> ${runs}; echo first; sleep 3; echo second`;
    const record = await submit(server, environment, ['sh', '-c', script], {}, tokens.admin);

    const followed = await readSse(
      await server.call(`/v1/executions/${record.id}/events?stream=stdout`, { token: tokens.admin, headers: { accept: 'text/event-stream' } }),
      (events) => outputBytes(events, 'stdout').toString().includes('first'),
    );
    expect(outputBytes(followed, 'stdout').toString()).toBe('first\n');

    await server.restart('SIGKILL');

    const done = await finished(server, record.id, tokens.admin);
    expect(done).toMatchObject({ status: 'exited', exitCode: 0 });
    const output = await server.call(`/v1/executions/${record.id}/output?stream=stdout`, { token: tokens.admin });
    expect(await output.text()).toBe('first\nsecond\n');
    await waitFor(() => readFileSync(runs, 'utf8'), { what: 'the marker of the one run', until: (text) => text === 'run\n' });
  });
});
