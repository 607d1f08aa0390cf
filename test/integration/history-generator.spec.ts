/**
 * The history-scale bench's generator writes what the runtime writes: a real runtime started on a generated store
 * serves the generated executions and runs `true` on a generated environment, and the events of that real `true`
 * (its stream and its allocation uses) have the generated ones' types, states, metadata and data fields; its
 * snapshots are ones the runtime loads from.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { generateHistory, type GeneratedHistory } from '../../bench/history-generator.ts';
import { fromSnapshot } from '../../src/actors/rehydrate.ts';
import { readLatestSnapshot } from '../../src/actors/snapshot-stream.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import { startBerth } from '../../src/runtime/berth.ts';
import { allocationActor } from '../../src/runtime/environments/allocation.actor.ts';
import { executionIdOf } from '../../src/runtime/executions/execution-service.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import type { RecordedEvent } from '../../src/store/event-store.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';

const EXECUTIONS = 300;
const root = mkdtempSync(join(tmpdir(), 'berth-history-generator-'));
const dataDir = join(root, 'data');
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** What must match between a real and a generated event: everything but ids, clocks, pids and the epoch. */
const shape = (e: RecordedEvent) => {
  const { runtimeId, epoch, correlationId, causationId, at, ...states } = e.metadata;
  return { type: e.type, metadata: { ...states, keys: Object.keys(e.metadata).sort() }, dataKeys: Object.keys(e.data as object).sort() };
};

async function streamsOf(id: string): Promise<{ execution: RecordedEvent[]; uses: RecordedEvent[] }> {
  const store = SqliteEventStore.open(join(dataDir, 'events.sqlite3'));
  try {
    const execution = await store.readStream(`execution-${id}`);
    const allocationId = (execution[0].data as { target: { allocationId: string } }).target.allocationId;
    const uses = (await store.readStream(`allocation-${allocationId}`)).filter((e) => (e.data as { useId?: string }).useId === id);
    return { execution, uses };
  } finally {
    await store.close();
  }
}

describe('history generator', () => {
  let history: GeneratedHistory;

  it('writes a store a real runtime serves: every generated execution finished, a new `true` runs on a generated environment', async () => {
    history = await generateHistory(dataDir, EXECUTIONS, () => undefined);
    expect(Object.values(history.executionsPerScope).reduce((a, b) => a + b, 0)).toBe(EXECUTIONS);
    const berth = await startBerth({
      settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 },
      runtimeId: history.runtimeId,
      providers: [new NativeProvider({ dataDir })],
    });
    try {
      const admin: Caller = { scope: 'default', role: 'admin' };
      for (const i of [0, 1, 2, 3, EXECUTIONS - 1]) {
        const scope = i % 1000 < 400 ? 'default' : i % 1000 < 700 ? 'acme' : 'globex';
        const record = await berth.api.getExecution({ scope, role: 'member' }, executionIdOf(scope, `history-${i}`));
        expect(record).toMatchObject({ operationId: `history-${i}`, status: 'exited', exitCode: 0, step: 'released' });
      }
      const saved = await berth.api.readOutput(admin, executionIdOf('default', 'history-0'), 'stdout', 0);
      expect(saved).toMatchObject({ next: 0, complete: true });

      const { id } = await berth.api.submitExecution(admin, { operationId: 'real-true', environment: history.defaultEnvironment, command: ['true'] });
      // Long-polls until terminal; the use is given back just after, which whenIdle waits for.
      await berth.api.getExecution(admin, id, 20_000);
      await berth.runtime.actors.whenIdle();
      expect(await berth.api.getExecution(admin, id)).toMatchObject({ status: 'exited', exitCode: 0, step: 'released' });
    } finally {
      await berth.stop();
    }
  }, 120_000);

  it('generates the events the runtime wrote for that `true`, in its stream and as its allocation uses', async () => {
    const real = await streamsOf(executionIdOf('default', 'real-true'));
    const generated = await streamsOf(executionIdOf('default', 'history-0'));
    expect(real.execution.map((e) => e.type)).toContain('execution.released');
    expect(generated.execution.map(shape)).toEqual(real.execution.map(shape));
    expect(generated.uses.map(shape)).toEqual(real.uses.map(shape));
  });

  it("writes snapshots a runtime trusts: a live allocation loads from its latest one, not from its first event", async () => {
    // Long enough for allocations past the snapshot interval (50 events).
    const longer = join(root, 'longer');
    await generateHistory(longer, 3_000, () => undefined);
    const store = SqliteEventStore.open(join(longer, 'events.sqlite3'));
    try {
      const lengths = new Map<string, bigint>();
      for (const e of await store.readAll({ fromPosition: 'start', maxCount: 1_000_000 })) if (e.stream.startsWith('allocation-')) lengths.set(e.stream, e.revision);
      const [allocation, last] = [...lengths].sort((a, b) => (a[1] > b[1] ? -1 : 1))[0]!;
      expect(last).toBeGreaterThan(50n);
      const snapshot = await readLatestSnapshot(store, allocation);
      expect(snapshot?.revision).toBeGreaterThanOrEqual(49n);
      expect(fromSnapshot(allocationActor, allocation.slice('allocation-'.length), snapshot).revision).toBe(snapshot!.revision);
    } finally {
      await store.close();
    }
  }, 120_000);
});
