/**
 * The history check over a log recorded by an earlier Berth (test/fixtures/history/log.jsonl, made by record.ts):
 * today's machines fold every event of it to the state recorded with it; a machine changed incompatibly (a test
 * makes such a change) is caught, naming the event — a refusal, or another state than the one recorded.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ActorType } from '../../../src/actors/actor-type.ts';
import { checkHistory } from '../../../src/actors/history-check.ts';
import { actorTypes } from '../../../src/runtime/registry.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';

interface Line {
  stream: string;
  revision: string;
  id: string;
  type: string;
  data: unknown;
  metadata: Record<string, unknown>;
}

const log: Line[] = readFileSync(new URL('../../fixtures/history/log.jsonl', import.meta.url), 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as Line);

let dir: string;
let store: SqliteEventStore;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-history-check-'));
  store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
  // The recorded log, event by event in its global order, at its recorded revisions.
  for (const e of log) {
    const revision = BigInt(e.revision);
    await store.append(e.stream, [{ id: e.id, type: e.type, data: e.data, metadata: e.metadata }], { expectedRevision: revision === 0n ? 'no_stream' : revision - 1n });
  }
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Today's actor types with one machine's guard replaced (an incompatible change of that machine). */
const withGuard = (type: string, guard: string, fn: () => boolean): ActorType[] =>
  actorTypes.map((t) => (t.type === type ? { ...t, machine: t.machine.provide({ guards: { [guard]: fn } }) } : t));

describe('berth check-history over a recorded log', () => {
  it("today's machines fold the recorded log exactly as it was recorded", async () => {
    const report = await checkHistory(store, actorTypes);
    expect(report.problems).toEqual([]);
    expect(report.events).toBe(log.filter((e) => typeof e.metadata.actorType === 'string').length);
    expect(new Set(log.map((e) => e.metadata.actorType))).toEqual(new Set([...actorTypes.map((t) => t.type).filter((t) => log.some((e) => e.metadata.actorType === t)), undefined]));
    expect(report.streams).toBeGreaterThan(15);
  });

  it('a machine that now refuses a recorded event is caught, naming it', async () => {
    const report = await checkHistory(store, withGuard('execution', 'cancelNotRequested', () => false));
    const cancelled = log.find((e) => e.type === 'execution.cancel_requested')!;
    expect(report.problems).toContainEqual(
      expect.objectContaining({ stream: cancelled.stream, revision: cancelled.revision, type: 'execution.cancel_requested', problem: 'refused' }),
    );
  });

  it('a machine that folds a recorded event to another state is caught, naming it and both states', async () => {
    const report = await checkHistory(store, withGuard('execution', 'writesMount', () => false));
    const exited = log.find((e) => e.metadata.actorType === 'execution' && e.metadata.to === 'checkpointing');
    expect(exited, 'the fixture holds a Docker turn command that checkpointed').toBeDefined();
    expect(report.problems).toContainEqual(
      expect.objectContaining({ stream: exited!.stream, revision: exited!.revision, problem: 'state', recorded: 'checkpointing' }),
    );
  });
});
