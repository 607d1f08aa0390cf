/**
 * waitForEntry with a far deadline (a turn waits for its shell command to settle, however long it runs): each wait
 * it hands the read model must fit a Node timer (at most 2^31-1 ms). A longer one fires at once with a
 * TimeoutOverflowWarning, and the loop spun every millisecond while any such command ran. The read model here is a
 * stand-in that records the timeouts it is given (the real one's timer is exactly what overflowed).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProjectionEngine } from '../../../src/projections/projection-engine.ts';
import { defineProjection, table } from '../../../src/projections/projection.ts';
import type { ReadModel } from '../../../src/projections/read-model.ts';
import { SqliteReadModelStore } from '../../../src/projections/sqlite-read-model-store.ts';
import { stepShown, waitForEntry, waitPastStep } from '../../../src/runtime/executions/lifecycle-wait.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';

describe('waitForEntry', () => {
  it('never asks for a wait longer than a timer can hold, and ends when stopped', async () => {
    const timeouts: number[] = [];
    const stop = new AbortController();
    const model = {
      position: 0n,
      query: { get: () => undefined },
      waitFor: (_position: bigint, ms: number) => {
        timeouts.push(ms);
        // The model moves on (another execution's event) without this one settling.
        return new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 5));
      },
    } as unknown as ReadModel;
    const waiting = waitForEntry(model, 'hexe_x', () => false, Number.MAX_SAFE_INTEGER, stop.signal);
    await new Promise((r) => setTimeout(r, 30));
    stop.abort();
    expect(await waiting).toBe(false);
    expect(timeouts.length).toBeGreaterThan(0);
    expect(Math.max(...timeouts)).toBeLessThanOrEqual(2 ** 31 - 1);
  });
});

/**
 * waitPastStep on a real read model (the engine folding a real SQLite log): a projection of `{id, step}` events that
 * counts how often the waiter looks at its row. A follower waits from the step the model shows, whatever it is called.
 */
describe('waitPastStep', () => {
  let dir: string;
  let store: SqliteEventStore;
  let engine: ProjectionEngine;
  let models: SqliteReadModelStore;
  const looks = { n: 0 };
  const stepped = (id: string, step: string) =>
    store.append(`step-${id}`, [{ id: randomUUID(), type: 'stepped', data: { id, step } }], { expectedRevision: 'any' });

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'berth-lifecycle-wait-'));
    store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
    models = SqliteReadModelStore.open(join(dir, 'projections.sqlite3'));
    engine = new ProjectionEngine({ store, models });
    looks.n = 0;
  });
  afterEach(async () => {
    await engine.stop();
    models.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function activity(): Promise<ReadModel> {
    const model = engine.register(
      defineProjection({
        name: 'steps',
        version: 1,
        tables: { executions: table<{ id: string; step: string }>() },
        reduce: (t, e) => {
          const { id, step } = e.data as { id: string; step: string };
          t.executions.put(id, { id, step });
        },
        queries: {
          get: (t, id: string) => {
            looks.n++;
            return t.executions.get(id);
          },
        },
      }),
    );
    await engine.start();
    return model as unknown as ReadModel;
  }

  it('should wake a follower at the model next step whatever it is called, and only then', async () => {
    const model = await activity();
    // `verifying` is a step no order of the waiter lists (one added later, as `checkpointing` once was).
    const { position } = await stepped('hexe_a', 'verifying');
    await model.waitFor(position, 5000);
    const shown = stepShown(model, 'hexe_a');
    expect(shown).toBe('verifying');
    let woken = false;
    const wait = waitPastStep(model, 'hexe_a', shown, 3000, new AbortController().signal).then((r) => ((woken = true), r));
    // Other executions move the model 50 times: each wakes the waiter for one look, none ends the wait.
    let last = position;
    for (let i = 0; i < 50; i++) ({ position: last } = await stepped(`hexe_other${i}`, 'running'));
    await model.waitFor(last, 5000);
    await new Promise((r) => setTimeout(r, 20));
    expect(woken).toBe(false);
    expect(looks.n).toBeLessThanOrEqual(2 + 50 + 1);
    await stepped('hexe_a', 'drained');
    expect(await wait).toBe(true);
  });

  it('should never wake a follower whose step the model still shows before the deadline, however often it looks', async () => {
    const model = await activity();
    const { position } = await stepped('hexe_b', 'some-step-added-later');
    await model.waitFor(position, 5000);
    const started = Date.now();
    looks.n = 0;
    expect(await waitPastStep(model, 'hexe_b', stepShown(model, 'hexe_b'), 300, new AbortController().signal)).toBe(false);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    // stepShown's look, the waiter's first, and none after: the model never moved. A spinning waiter looks thousands
    // of times; one that looked after each timer would look again whenever a busy event loop fired one early.
    expect(looks.n).toBe(2);
  });
});
