/**
 * The actor runtime's batching: an effect that returns several events for its own actor gets them decided in order
 * and appended in one store append, each with its own revision and metadata, and each transition's effects run after
 * that append, in order, knowing which events followed their cause.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assign, setup } from 'xstate';
import { z } from 'zod';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../../src/actors/actor-runtime.ts';
import { defineActor } from '../../../src/actors/actor-type.ts';
import { snapshotStreamOf } from '../../../src/actors/snapshot-stream.ts';
import type { AppendOptions, EventData, EventStore } from '../../../src/store/event-store.ts';
import { ForwardingEventStore } from '../../../src/store/forwarding-event-store.ts';
import { SqliteEventStore } from '../../../src/store/sqlite-event-store.ts';

type RelayEvent =
  | { type: 'relay.begun' }
  | { type: 'relay.stepped'; n: number }
  | { type: 'relay.ended' }
  | { type: 'runtime.recovered'; runtimeId: string; epoch: number; at: number };

interface Noted {
  n: number;
  revision: bigint;
  followedBy: readonly string[] | undefined;
  /** Whether the store already held the cause when the effect ran. */
  durable: boolean;
}

interface RelayServices {
  store: EventStore;
  noted: Noted[];
  /** Awaited by `advance` before it answers, so a test can let another writer in first. */
  gate: Promise<void>;
}

const note = { type: 'note', params: ({ event }: { event: RelayEvent }) => ({ n: event.type === 'relay.stepped' ? event.n : 0 }) } as const;

/** begun -> (advance) -> stepped 1, begun (refused), stepped 2, ended: one effect, four outcomes, one refused. */
const relayMachine = setup({
  types: {} as { context: { steps: number[] }; events: RelayEvent },
  actions: { advance: () => {}, note: (_, _params: { n: number }) => {} },
}).createMachine({
  id: 'relay',
  context: { steps: [] },
  initial: 'idle',
  states: {
    idle: { on: { 'relay.begun': { target: 'running', actions: 'advance' } } },
    running: {
      on: {
        'relay.stepped': {
          actions: [assign({ steps: ({ context, event }) => [...context.steps, event.n] }), note],
        },
        'relay.ended': { target: 'ended', actions: note },
      },
    },
    ended: { type: 'final' },
  },
});

const relayActor = defineActor<typeof relayMachine, RelayServices>({
  type: 'relay',
  machine: relayMachine,
  events: {
    'relay.begun': z.object({}),
    'relay.stepped': z.object({ n: z.number().int() }),
    'relay.ended': z.object({}),
  },
  effects: {
    advance: async (_params, { services }) => {
      await services.gate;
      return [
        { type: 'relay.stepped', n: 1 },
        { type: 'relay.begun' },
        { type: 'relay.stepped', n: 2 },
        { type: 'relay.ended' },
      ];
    },
    note: async ({ n }: { n: number }, { services, stream, cause }) => {
      const stored = await services.store.readStream(stream);
      services.noted.push({ n, revision: cause.revision, followedBy: cause.followedBy, durable: stored.some((e) => e.id === cause.id) });
    },
  },
});

/** Records the event types of every append, so a test sees how many writes a command took. */
class RecordingStore extends ForwardingEventStore {
  readonly appends: string[][] = [];
  override append(stream: string, events: EventData[], options: AppendOptions) {
    if (stream.startsWith('relay-')) this.appends.push(events.map((e) => e.type));
    return this.inner.append(stream, events, options);
  }
}

let dir: string;
let file: string;
const closing: (() => Promise<unknown>)[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-batching-'));
  file = join(dir, 'events.sqlite3');
});

afterEach(async () => {
  for (const close of closing.splice(0)) await close();
  rmSync(dir, { recursive: true, force: true });
});

async function relayRuntime(runtimeId: string, gate: Promise<void> = Promise.resolve(), snapshotEvery = 50) {
  const store = new RecordingStore(SqliteEventStore.open(file));
  const logged: string[] = [];
  const log = (_obj: object, msg?: string) => void logged.push(msg ?? '');
  const services: RelayServices = { store, noted: [], gate };
  const rt = new ActorRuntime<RelayServices>({
    store,
    runtimeId,
    services,
    snapshotEvery,
    logger: { debug: log, info: log, warn: log, error: log },
  });
  rt.register(relayActor);
  await rt.start();
  closing.push(async () => {
    await rt.whenIdle();
    await store.close();
  });
  return { rt, store, services, logged };
}

describe('ActorRuntime: batched effect outcomes', () => {
  it('appends the accepted outcomes of one effect in one append, each with its own revision and metadata', async () => {
    const { rt, store, services, logged } = await relayRuntime('rt-a');
    const begun = await rt.send('relay', 'r1', { type: 'relay.begun' }, { correlationId: 'corr-1' });
    await rt.whenIdle();

    expect(store.appends).toEqual([['relay.begun'], ['relay.stepped', 'relay.stepped', 'relay.ended']]);
    const events = await store.readStream('relay-r1');
    expect(events.map((e) => [e.revision, e.type, e.data])).toEqual([
      [0n, 'relay.begun', {}],
      [1n, 'relay.stepped', { n: 1 }],
      [2n, 'relay.stepped', { n: 2 }],
      [3n, 'relay.ended', {}],
    ]);
    expect(events.slice(1).map((e) => [e.metadata.from, e.metadata.to, e.metadata.finished])).toEqual([
      ['running', 'running', false],
      ['running', 'running', false],
      ['running', 'ended', true],
    ]);
    for (const e of events.slice(1)) expect(e.metadata).toMatchObject({ causationId: begun.eventId, correlationId: 'corr-1' });
    expect(new Set(events.map((e) => e.id)).size).toBe(4);

    // The refused outcome is logged and left out; the others still went in.
    expect(rt.stats.rejected).toBe(1);
    expect(logged).toContain('an effect outcome was refused');

    // Each transition's effect ran after the batch was durable, in order, knowing what followed its cause.
    expect(services.noted).toEqual([
      { n: 1, revision: 1n, followedBy: ['relay.stepped', 'relay.ended'], durable: true },
      { n: 2, revision: 2n, followedBy: ['relay.ended'], durable: true },
      { n: 0, revision: 3n, followedBy: [], durable: true },
    ]);
    expect(await rt.get('relay', 'r1')).toMatchObject({ state: 'ended', revision: 3n, finished: true, context: { steps: [1, 2] } });
  });

  it('decides the whole batch again on the new state when the stream moved under it', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const a = await relayRuntime('rt-a', gate);
    await a.rt.send('relay', 'r1', { type: 'relay.begun' });
    // An event no runtime wrote (an import: no runtimeId, so rt-a still owns the stream) lands first; rt-a's cached
    // state is now one event behind when its effect answers.
    await a.store.append('relay-r1', [{ id: randomUUID(), type: 'relay.stepped', data: { n: 7 }, metadata: { schemaVersion: 1 } }], {
      expectedRevision: 0n,
    });
    open();
    await a.rt.whenIdle();

    expect(a.rt.stats.wrongExpectedVersion).toBe(1);
    expect(a.store.appends.at(-1)).toEqual(['relay.stepped', 'relay.stepped', 'relay.ended']);
    const events = await a.store.readStream('relay-r1');
    expect(events.map((e) => e.type)).toEqual(['relay.begun', 'relay.stepped', 'relay.stepped', 'relay.stepped', 'relay.ended']);
    expect(await a.rt.get('relay', 'r1')).toMatchObject({ state: 'ended', revision: 4n, context: { steps: [7, 1, 2] } });
  });

  it('snapshots when a batch crosses a multiple of N events', async () => {
    const { rt, store } = await relayRuntime('rt-a', Promise.resolve(), 3);
    await rt.send('relay', 'r1', { type: 'relay.begun' });
    await rt.whenIdle();
    const snaps = await store.readStream(snapshotStreamOf('relay-r1'));
    // The batch (revisions 1 to 3) holds the 3rd event: one snapshot, of the state after the whole batch.
    expect(snaps.map((s) => (s.data as { revision: string }).revision)).toEqual(['3']);
  });
});
