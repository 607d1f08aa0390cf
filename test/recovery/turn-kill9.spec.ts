/**
 * Ownership survives an ambiguous execution (issue 13): a real `berth serve` (native provider, a member's token, so
 * the command runs contained) is SIGKILLed while a shell command of an open turn runs. After a restart on the same
 * data directory the turn still holds the storage and a second turn is refused; the execution is recovered, not run
 * again, and ends exited; then the release succeeds, records the command's changes, and a new turn opens.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { createEnvironment, finished, startServer, type BerthServer } from '../e2e/berth-server.ts';
import { waitFor } from '../fixtures/wait-for.ts';

let server: BerthServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(() => server?.close());

describe('a turn across a killed berth serve', () => {
  it('keeps the storage held while the command is ambiguous, recovers the command once, then releases', async () => {
    const environmentId = await createEnvironment(server);
    const ws = await server.json<{ id: string }>('/v1/workspaces', { body: { name: 'kill-9' } });
    const session = await server.json<{ id: string }>('/v1/sessions', { body: { environmentId, workspaceId: ws.id } });
    const other = await server.json<{ id: string }>('/v1/sessions', { body: { environmentId, workspaceId: ws.id } });
    const turn = await server.json<{ id: string }>(`/v1/sessions/${session.id}/turns`, { body: {} });
    const execution = await server.json<{ id: string }>('/v1/executions', {
      body: { operationId: 'kill9-shell', session: session.id, turn: turn.id, command: 'echo "run $PWD" >> runs.txt; sleep 2; echo done >> out.txt' },
    });
    const root = join(server.dataDir, 'workspaces', ws.id, 'root');
    await waitFor(() => server.json(`/v1/executions/${execution.id}`), { what: 'the command running', until: (x) => x.status === 'running', timeoutMs: 30_000 });
    await waitFor(() => existsSync(join(root, 'runs.txt')), { what: 'the command started in the workspace', timeoutMs: 30_000 });
    expect(existsSync(join(root, 'out.txt'))).toBe(false);

    await server.restart('SIGKILL');

    // The turn still holds: nothing took the storage over, and another turn is refused.
    expect((await server.json(`/v1/workspaces/${ws.id}`)).holder).toMatchObject({ turnId: turn.id, sessionId: session.id });
    const busy = await server.call(`/v1/sessions/${other.id}/turns`, { body: {} });
    expect(busy.status).toBe(409);
    expect((await busy.json()).error).toMatchObject({ code: 'workspace_busy' });

    // The execution is recovered (its process outlived the server) and ends exited; it ran once.
    expect(await finished(server, execution.id)).toMatchObject({ status: 'exited', exitCode: 0 });
    const store = SqliteEventStore.open(join(server.dataDir, 'events.sqlite3'));
    try {
      const types = (await store.readStream(`execution-${execution.id}`)).map((e) => e.type);
      expect(types).toContain('runtime.recovered');
      expect(types.filter((t) => t === 'execution.started')).toHaveLength(1);
    } finally {
      await store.close();
    }
    // Contained (a member's native command): it ran in the workspace view, at /workspace.
    expect(readFileSync(join(root, 'runs.txt'), 'utf8')).toBe('run /workspace\n');
    expect(readFileSync(join(root, 'out.txt'), 'utf8')).toBe('done\n');

    const released = await server.json(`/v1/sessions/${session.id}/turns/${turn.id}/release`, { body: {} });
    expect(released).toMatchObject({ id: turn.id, state: 'released', cleared: false, executions: [{ executionId: execution.id, recorded: true }] });
    const history = await server.json<{ tool: string; executionId?: string; turnId: string; changes: { path: string; before: unknown; after: unknown }[] }[]>(
      `/v1/workspaces/${ws.id}/history`,
    );
    const shell = history.filter((h) => h.tool === 'shell');
    expect(shell).toHaveLength(1);
    expect(shell[0]).toMatchObject({ executionId: execution.id, turnId: turn.id });
    expect(shell[0]!.changes.map((c) => [c.path, c.before, c.after !== null])).toEqual([
      ['out.txt', null, true],
      ['runs.txt', null, true],
    ]);

    expect((await server.json(`/v1/workspaces/${ws.id}`)).holder).toBeNull();
    const next = await server.json<{ id: string; state: string }>(`/v1/sessions/${other.id}/turns`, { body: {} });
    expect(next.state).toBe('open');
    const read = await server.call(`/v1/sessions/${other.id}/turns/${next.id}/files?path=out.txt`);
    expect(await read.text()).toBe('done\n');
  }, 120_000);
});
