/**
 * `waitForOutput` with what the caller has seen (cursors and lifecycle step) wakes exactly: not while nothing new is
 * there (a follower never spins), at once when bytes past a cursor exist, and when the lifecycle moves on after every
 * watched stream has ended. Real runtime, native provider.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Berth } from '../../src/runtime/berth.ts';
import { caller, environmentFor, settled, startTestBerth, tempDir } from './executions-harness.ts';

let dir: ReturnType<typeof tempDir>;
let berth: Berth;
let env: string;

beforeAll(async () => {
  dir = tempDir('berth-output-wait-');
  berth = await startTestBerth(dir.path, false);
  env = await environmentFor(berth.api, 'native');
});

afterAll(async () => {
  await berth?.stop();
  dir?.remove();
});

const submit = async (command: string) =>
  berth.api.submitExecution(caller, { operationId: `wait-${Math.random().toString(36).slice(2)}`, environment: env, command });

/** Reads stdout from `cursor` until it holds bytes (waiting with `seen`); the read and how many waits it took. */
async function readSome(id: string, cursor: number) {
  const api = berth.api;
  for (let waits = 0; ; waits++) {
    const read = await api.readOutput(caller, id, 'stdout', cursor);
    if (read.data.length > 0 || read.closed) return { read, waits };
    const record = await api.getExecution(caller, id);
    await api.waitForOutput(caller, id, 10_000, { cursors: { stdout: cursor }, step: record.step });
  }
}

describe('waitForOutput with what the caller has seen', () => {
  it('sleeps while nothing is past the cursor, and wakes when the next bytes are written', async () => {
    const exec = await submit('printf first; sleep 1; printf second; sleep 1');
    const first = await readSome(exec.id, 0);
    expect(first.read.data.toString()).toBe('first');
    // The first bytes go out as they land, which may be before the start is recorded: wait for that step first.
    let record = await berth.api.getExecution(caller, exec.id);
    for (let i = 0; i < 100 && record.step === 'dispatched'; i++) {
      await berth.api.waitForOutput(caller, exec.id, 100, { cursors: { stdout: 5 }, step: record.step });
      record = await berth.api.getExecution(caller, exec.id);
    }
    expect(record.step).toBe('running');

    const started = Date.now();
    await berth.api.waitForOutput(caller, exec.id, 10_000, { cursors: { stdout: 5 }, step: record.step });
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThan(500); // no early wake while the command sleeps
    expect(waited).toBeLessThan(5_000); // and no sleeping through the write
    expect((await berth.api.readOutput(caller, exec.id, 'stdout', 5)).data.toString()).toBe('second');
    await settled(berth.api, exec.id);
  });

  it('returns at once when bytes past the cursor are already there, or the caller read an older step', async () => {
    const exec = await submit('printf abc; sleep 2');
    await readSome(exec.id, 0);
    const record = await berth.api.getExecution(caller, exec.id);
    let started = Date.now();
    await berth.api.waitForOutput(caller, exec.id, 10_000, { cursors: { stdout: 1 }, step: record.step });
    expect(Date.now() - started).toBeLessThan(1_000);
    started = Date.now();
    await berth.api.waitForOutput(caller, exec.id, 10_000, { cursors: { stdout: 3 }, step: 'accepted' });
    expect(Date.now() - started).toBeLessThan(1_000);
    await settled(berth.api, exec.id);
  });

  it('after every stream has ended, wakes on the next lifecycle step until the output is saved', async () => {
    const exec = await submit('printf done');
    const { read } = await readSome(exec.id, 0);
    let cursor = read.next;
    // Once the stream has ended, nothing is watched but the lifecycle: each wait ends at the next step (exited,
    // drained, saved), and a caller that spun would make dozens of rounds.
    let waits = 0;
    for (; waits < 100; waits++) {
      const record = await berth.api.getExecution(caller, exec.id);
      const again = await berth.api.readOutput(caller, exec.id, 'stdout', cursor);
      cursor = again.next;
      if (again.complete) break;
      const cursors = again.closed ? {} : { stdout: cursor };
      await berth.api.waitForOutput(caller, exec.id, 10_000, { cursors, step: record.step });
    }
    expect(cursor).toBe(4);
    expect(waits).toBeLessThanOrEqual(6);
  });
});
