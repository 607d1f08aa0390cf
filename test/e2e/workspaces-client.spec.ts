/**
 * The typed client's workspaces against a real `berth serve` child: a managed workspace, a session bound to it, a
 * tool turn (`turns.with`) writing, reading and editing with byte versions (a stale If-Match is `stale_version`,
 * 412, and writes nothing), a shell command in the turn, the file history; turns on one storage exclude each other,
 * `turns.with` releases even when its function throws, and deletion waits for the holder.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BerthApiError } from '../../src/client/berth-api-error.ts';
import { Berth } from '../../src/client/berth-client.ts';
import { startServer, tokens, type BerthServer } from './berth-server.ts';

let server: BerthServer;
let client: Berth;
let environmentId: string;

beforeAll(async () => {
  server = await startServer();
  client = await Berth.connect({ url: server.url, token: tokens.alice });
  environmentId = (await client.environments.create({ name: 'workspace shell' })).id;
});
afterAll(() => server?.close());

const rejection = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);

async function boundSession() {
  const workspace = await client.workspaces.create({ name: `client ${Math.random().toString(36).slice(2, 8)}` });
  const session = await client.sessions.create({ environmentId, workspaceId: workspace.id });
  return { workspace, session };
}

describe('workspaces from the typed client', () => {
  it('round trip: versions on write, read and edit; a stale write refused; a shell command; the history names the turn', async () => {
    const { workspace, session } = await boundSession();
    expect(workspace).toMatchObject({ object: 'workspace', kind: 'managed', holder: null });
    expect((await client.workspaces.list()).map((w) => w.id)).toContain(workspace.id);
    expect(session).toMatchObject({ workspaceId: workspace.id, workspaceGeneration: workspace.generation, cwd: '' });

    const { turnId, stale, shell } = await client.turns.with(session.id, async (turn) => {
      expect((await client.workspaces.get(workspace.id)).holder).toMatchObject({ turnId: turn.turn.id, sessionId: session.id });
      const created = await turn.files.write('notes/a.txt', 'hello world\n', { createOnly: true, parents: true });
      const read = await turn.files.read('notes/a.txt');
      expect(read).toMatchObject({ version: created.version, size: 12, offset: 0 });
      expect(read.data.toString()).toBe('hello world\n');
      expect((await turn.files.read('notes/a.txt', { offset: 6, limit: 5 })).data.toString()).toBe('world');

      const edited = await turn.files.edit('notes/a.txt', 'world', 'berth', { ifMatch: created.version });
      expect(edited.version).not.toBe(created.version);
      const stale = await rejection(turn.files.write('notes/a.txt', 'clobber', { ifMatch: created.version }));
      expect((await turn.files.read('notes/a.txt')).data.toString()).toBe('hello berth\n'); // nothing written
      await expect(turn.files.write('notes/a.txt', 'again', { createOnly: true })).rejects.toMatchObject({ code: 'stale_version', status: 412 });
      await expect(turn.files.edit('notes/a.txt', 'absent text', 'x')).rejects.toMatchObject({ code: 'invalid_request' });

      expect(await turn.files.stat('notes/a.txt')).toMatchObject({ type: 'file', size: 12, version: edited.version });
      await turn.files.mkdir('empty');
      expect((await turn.files.list()).map((e) => [e.name, e.type])).toEqual([
        ['empty', 'directory'],
        ['notes', 'directory'],
      ]);
      await turn.files.remove('empty');
      const shell = await turn.run('tr a-z A-Z < notes/a.txt > notes/upper.txt && cat notes/upper.txt', { onStdout: () => undefined });
      return { turnId: turn.turn.id, stale, shell };
    });

    expect(stale).toBeInstanceOf(BerthApiError);
    expect(stale).toMatchObject({ code: 'stale_version', status: 412 });
    expect(shell).toMatchObject({ status: 'exited', exitCode: 0 });
    expect(await client.turns.get(session.id, turnId)).toMatchObject({ state: 'released', cleared: false });
    expect((await client.workspaces.get(workspace.id)).holder).toBeNull();

    const history = await client.workspaces.history(workspace.id);
    expect(history.every((h) => h.turnId === turnId)).toBe(true);
    expect(history.map((h) => h.tool)).toEqual(['write', 'edit', 'mkdir', 'remove', 'shell']);
    expect(history.at(-1)).toMatchObject({ executionId: shell.id, changes: [{ path: 'notes/upper.txt', before: null }] });
    const firstPage = await client.workspaces.historyPage(workspace.id, { limit: 2 });
    expect(firstPage.items.length).toBeLessThanOrEqual(2);
    expect(firstPage.next).toBeDefined();
    const walked = [];
    for await (const h of client.workspaces.iterateHistory(workspace.id, { limit: 2 })) walked.push(h);
    expect(walked).toEqual(history);

    const after = await client.turns.with(session.id, (turn) => turn.files.read('notes/upper.txt'));
    expect(after.data.toString()).toBe('HELLO BERTH\n');
  }, 60_000);

  it('large bytes: a 4 MiB stream written in one PUT reads back identical', async () => {
    const { session } = await boundSession();
    const chunk = Buffer.alloc(64 * 1024);
    const chunks = Array.from({ length: 64 }, (_, i) => Buffer.from(chunk.fill(i)));
    async function* stream() {
      yield* chunks;
    }
    const back = await client.turns.with(session.id, async ({ files }) => {
      const written = await files.write('big.bin', stream());
      expect(written.size).toBe(4 * 1024 * 1024);
      return files.read('big.bin');
    });
    expect(back.data.equals(Buffer.concat(chunks))).toBe(true);
  }, 60_000);

  it('one turn at a time per storage: workspace_busy, then waitMs waits for the release; with() releases on a throw', async () => {
    const { workspace, session } = await boundSession();
    const other = await client.sessions.create({ workspaceId: workspace.id });
    const first = await client.turns.open(session.id);
    const busy = await rejection(client.turns.open(other.id));
    expect(busy).toBeInstanceOf(BerthApiError);
    expect(busy).toMatchObject({ code: 'workspace_busy', status: 409 });
    await expect(client.workspaces.delete(workspace.id)).rejects.toMatchObject({ code: 'workspace_busy' });

    let releaseSent: number | undefined;
    const releasing = new Promise((resolve) =>
      setTimeout(() => {
        releaseSent = Date.now();
        resolve(client.turns.release(session.id, first.id));
      }, 300),
    );
    const waited = await client.turns.open(other.id, { waitMs: 10_000 });
    expect(releaseSent).toBeDefined(); // it waited for the release rather than answering busy or sharing the storage
    expect((await client.workspaces.get(workspace.id)).holder).toMatchObject({ turnId: waited.id });
    await releasing;
    await client.turns.release(other.id, waited.id);

    const thrown = await rejection(client.turns.with(session.id, async () => Promise.reject(new Error('the agent failed'))));
    expect((thrown as Error).message).toBe('the agent failed');
    expect((await client.workspaces.get(workspace.id)).holder).toBeNull();

    await client.sessions.delete(other.id);
    await expect(client.turns.open(other.id)).rejects.toBeInstanceOf(BerthApiError);
    await client.workspaces.delete(workspace.id);
    await expect(client.workspaces.get(workspace.id)).rejects.toMatchObject({ code: 'workspace_unavailable' });
  }, 60_000);

  it("another tenant's token reaches neither the workspace nor the turn", async () => {
    const { workspace, session } = await boundSession();
    const bob = await Berth.connect({ url: server.url, token: tokens.bob });
    const turn = await client.turns.open(session.id);
    await expect(bob.workspaces.get(workspace.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.turns.files(session.id, turn.id).read('x')).rejects.toMatchObject({ status: 404 });
    await client.turns.release(session.id, turn.id);
  }, 30_000);
});
