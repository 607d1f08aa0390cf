/**
 * A read model whose reducer throws on one stored event, through a real `berth serve` on a real SQLite store: the
 * server still starts, the other read models serve, the failed one answers `projection_failed` and `/healthz` says
 * `degraded`; after the event is repaired, `POST /v1/projections/{name}/rebuild` brings it back.
 */
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { berth } from '../integration/cli-process.ts';
import { createEnvironment, finished, startServer, submit, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

describe('a poisoned read model', () => {
  it('fails alone: the server starts, the others serve, health says degraded, a rebuild after the repair restores it', async () => {
    const env = await createEnvironment(server);
    const run = await submit(server, env, ['sh', '-c', 'echo poisoned-but-kept']);
    expect((await finished(server, run.id)).status).toBe('exited');
    await server.stop('SIGTERM');

    // The environment's first event becomes JSON the catalog's reducer cannot fold (a bad hand on the database);
    // the read models are dropped, so the restart folds the log again and meets it.
    const events = new Database(join(server.dataDir, 'events.sqlite3'));
    const created = events.prepare("SELECT position, data FROM events WHERE stream = ? AND type = 'environment.created'").get(`environment-${env}`) as { position: number; data: string };
    events.prepare('UPDATE events SET data = ? WHERE position = ?').run('null', created.position);
    events.close();
    for (const suffix of ['', '-wal', '-shm']) rmSync(join(server.dataDir, `projections.sqlite3${suffix}`), { force: true });
    await server.restart();

    const health = await server.json('/healthz', { token: null });
    expect(health).toMatchObject({ status: 'degraded', failedProjections: ['catalog'] });
    const environments = await server.call('/v1/environments');
    expect(environments.status).toBe(503);
    expect((await environments.json()).error).toMatchObject({ code: 'projection_failed', detail: { projection: 'catalog' } });
    // The executions' read model never saw the bad event: it serves, with the command's record.
    const record = await server.json(`/v1/executions/${run.id}`);
    expect(record).toMatchObject({ status: 'exited', exitCode: 0 });
    const listed = await server.json<{ id: string }[]>('/v1/executions');
    expect(listed.map((x) => x.id)).toContain(run.id);

    // The scrape still serves, and counts the failure.
    const metrics = await (await server.call('/metrics', { token: tokens.admin })).text();
    expect(metrics).toMatch(/^berth_projection_failed\{projection="catalog"\} 1$/m);
    expect(metrics).toMatch(/^berth_projection_failed\{projection="activity"\} 0$/m);
    const models = await server.json<{ name: string; failed: unknown }[]>('/v1/projections', { token: tokens.admin });
    expect(models.find((m) => m.name === 'catalog')?.failed).toMatchObject({ position: String(created.position) });
    expect(models.filter((m) => m.failed).map((m) => m.name)).toEqual(['catalog']);
    // A member may neither see nor rebuild read models (they span every scope).
    expect((await server.call('/v1/projections')).status).toBe(403);
    expect((await server.call('/v1/projections/catalog/rebuild', { method: 'POST', body: {} })).status).toBe(403);

    // The CLI says the same (exit 1 while a model is failed).
    const cli = (...args: string[]) => berth(['projections', ...args, '--url', server.url, '--token', tokens.admin]);
    const shown = await cli();
    expect(shown.code).toBe(1);
    expect(shown.stdout).toMatch(new RegExp(`^catalog\\s+\\d+\\s+\\d+\\s+failed at ${created.position}: `, 'm'));
    expect(shown.stdout).toMatch(/^activity\s+\d+\s+\d+\s+serving$/m);

    // Repaired, a rebuild (here by the CLI) brings it back without a restart.
    const repair = new Database(join(server.dataDir, 'events.sqlite3'));
    repair.prepare('UPDATE events SET data = ? WHERE position = ?').run(created.data, created.position);
    repair.close();
    const rebuilt = await cli('rebuild', 'catalog', '--json');
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    expect(JSON.parse(rebuilt.stdout)).toMatchObject({ name: 'catalog', failed: null });
    expect(await server.json('/healthz', { token: null })).toMatchObject({ status: 'ok', failedProjections: [] });
    expect((await server.json<{ id: string }[]>('/v1/environments')).map((e) => e.id)).toContain(env);
    const missing = await server.call('/v1/projections/nope/rebuild', { method: 'POST', body: {}, token: tokens.admin });
    expect(missing.status).toBe(404);
  });
});
