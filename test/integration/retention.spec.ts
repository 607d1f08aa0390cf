/**
 * Retention against a real `berth serve` (real SQLite files, real commands): executions released longer ago than the
 * policy's age (here 3 s, so real time ages them) lose their output to the archive directory and their streams are
 * compacted to one summary, while the audit feed keeps the order of everything left, a running command is untouched
 * and still replays, and a restart recovers the same unfinished actors.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createEnvironment, finished, running, startServer, submit, tokens, type BerthServer } from '../e2e/berth-server.ts';
import { OpenApiCheck, type OpenApiDocument } from '../e2e/openapi-check.ts';
import { waitFor } from '../fixtures/wait-for.ts';
import { berth, cleanEnv } from './cli-process.ts';

const AGE_MS = 3_000;
let server: BerthServer;
let archiveDir: string;

beforeAll(async () => {
  archiveDir = join(mkdtempSync(join(tmpdir(), 'berth-retention-archive-')), 'archive');
  server = await startServer([], {
    BERTH_RETENTION_DAYS: String(AGE_MS / 86_400_000),
    BERTH_RETENTION_ARCHIVE_DIR: archiveDir,
    // Passes run when the test asks for them (the route), not on a timer.
    BERTH_MAINTENANCE_MS: '3600000',
    BERTH_LOG_LEVEL: 'info',
  });
}, 60_000);

afterAll(async () => {
  await server?.close();
  rmSync(join(archiveDir, '..'), { recursive: true, force: true });
});

interface FeedEvent {
  id: string;
  stream: string;
  position: string;
  type: string;
  data: Record<string, any>;
}

/** Alice's whole feed as `berth events --json` prints it (a process of its own beside the server, which answers it). */
async function feed(): Promise<FeedEvent[]> {
  const out = await berth(['events', '--json', '--data-dir', server.dataDir], cleanEnv({ BERTH_TOKEN: tokens.alice }));
  expect(out.code, out.stderr).toBe(0);
  return out.stdout.trim().split('\n').map((l) => JSON.parse(l) as FeedEvent);
}

/** The `recovery done` report of the server's last start. */
function lastRecovery(): { actors: number; failed: number } {
  const lines = server.process.stderr().split('\n').filter((l) => l.includes('"recovery done"'));
  return JSON.parse(lines[lines.length - 1]);
}

const released = (id: string) =>
  waitFor(() => server.json(`/v1/executions/${id}`), { until: (r) => r.step === 'released', timeoutMs: 30_000, what: `${id} released` });

it('should compact aged executions to their records, archive their output, and leave the feed, live actors and recovery as they were', async () => {
  const env = await createEnvironment(server);
  const done: Record<string, any>[] = [];
  const outputs: string[] = [];
  for (let i = 0; i < 3; i++) {
    outputs.push(`retained-output-${i}-${process.pid}\n`);
    const x = await submit(server, env, `printf 'retained-output-${i}-${process.pid}\\n'; echo err-${i} >&2; exit ${i}`);
    await finished(server, x.id);
    done.push(await released(x.id));
  }
  const live = await submit(server, env, ['sleep', '300']);
  await running(server, live.id);

  await server.restart('SIGKILL');
  const recoveredBefore = lastRecovery();
  expect((await server.json(`/v1/executions/${live.id}`)).status).toBe('running');
  const before = await feed();
  const liveReplayBefore = await server.json<any[]>(`/v1/streams/execution-${live.id}`);

  // Members may neither run nor see a pass.
  const refused = await server.call('/v1/retention/run', { method: 'POST' });
  expect(refused.status).toBe(403);
  expect((await refused.json()).error.code).toBe('forbidden');

  await new Promise((r) => setTimeout(r, AGE_MS + 500));
  const report = await server.json('/v1/retention/run', { method: 'POST', token: tokens.admin });
  const openapi = new OpenApiCheck(await server.json<OpenApiDocument>('/v1/openapi.json', { token: null }));
  openapi.expect('post', '/v1/retention/run', 200, report);
  expect(report).toMatchObject({ compacted: 3, failed: 0 });
  expect(report.archived).toBeGreaterThanOrEqual(3);

  // Each record is answered as it was; its output is expired, and archived byte for byte.
  for (const [i, x] of done.entries()) {
    const record = await server.json(`/v1/executions/${x.id}`);
    const { step: _before, updatedAt: _u1, ...was } = x;
    const { step, updatedAt: _u2, ...is } = record;
    expect(step).toBe('compacted');
    expect(is).toEqual(was);
    expect(record.exitCode).toBe(i);
    const output = await server.call(`/v1/executions/${x.id}/output?stream=stdout&cursor=0`);
    expect(output.status).toBe(410);
    const expired = await output.json();
    expect(expired.error).toMatchObject({ code: 'output_expired', detail: { executionId: x.id, output: 'archived' } });
    openapi.expect('get', '/v1/executions/{id}', 200, record);
    const hex = createHash('sha256').update(outputs[i]).digest('hex');
    expect(readFileSync(join(archiveDir, hex.slice(0, 2), hex), 'utf8')).toBe(outputs[i]);
    expect(existsSync(join(server.dataDir, 'artifacts', hex.slice(0, 2), hex))).toBe(false);

    // The same operation again is the same execution, never a second run; another input is a conflict.
    const again = await server.json('/v1/executions', { body: { operationId: x.operationId, environment: env, command: x.command } });
    expect([again.id, again.status, again.step]).toEqual([x.id, x.status, 'compacted']);
    const conflict = await server.call('/v1/executions', { body: { operationId: x.operationId, environment: env, command: ['true'] } });
    expect(conflict.status).toBe(409);
    const replay = await server.json<any[]>(`/v1/streams/execution-${x.id}`);
    expect(replay.map((s) => [s.event.type, s.stateBefore, s.stateAfter])).toEqual([['execution.compacted', 'pristine', 'compacted']]);
  }

  // The feed: every event but the compacted streams' old ones, at the same positions in the same order, then the summaries.
  const after = await feed();
  const compacted = new Set(done.map((x) => `execution-${x.id}`));
  const ofCompacted = (e: FeedEvent) => compacted.has(e.stream) || compacted.has(e.stream.slice('snapshot-'.length));
  const kept = (e: FeedEvent) => !ofCompacted(e);
  expect(after.filter(kept).map((e) => [e.position, e.id])).toEqual(before.filter(kept).map((e) => [e.position, e.id]));
  expect(before.filter(ofCompacted).length).toBeGreaterThanOrEqual(3 * 7);
  const summaries = after.filter(ofCompacted);
  expect(summaries.map((e) => e.type)).toEqual(['execution.compacted', 'execution.compacted', 'execution.compacted']);
  expect(Math.min(...summaries.map((e) => Number(e.position)))).toBeGreaterThan(Number(before[before.length - 1].position));
  expect(after.filter((e) => e.stream === `execution-${live.id}`).map((e) => e.id)).toEqual(
    before.filter((e) => e.stream === `execution-${live.id}`).map((e) => e.id),
  );

  // The running command was not touched: it replays as before and still runs.
  expect(await server.json<any[]>(`/v1/streams/execution-${live.id}`)).toEqual(liveReplayBefore);
  expect((await server.json(`/v1/executions/${live.id}`)).status).toBe('running');

  // A restart recovers the same unfinished actors, and the compacted records survive it.
  await server.restart('SIGKILL');
  expect(lastRecovery()).toMatchObject({ actors: recoveredBefore.actors, failed: 0 });
  expect((await server.json(`/v1/executions/${live.id}`)).status).toBe('running');
  for (const x of done) expect((await server.json(`/v1/executions/${x.id}`)).status).toBe(x.status);
  await server.json(`/v1/executions/${live.id}/cancel`, { method: 'POST' });
  expect((await finished(server, live.id)).status).toBe('cancelled');
}, 180_000);
