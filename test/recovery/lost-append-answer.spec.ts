/**
 * An append whose answer is lost after it landed, then a store that does not answer for a while: the runtime looks
 * for its events in the log once the store answers again, and if they are there the command succeeds and its effects
 * run, once; if they are not, the command fails `unavailable` and nothing ran. A fake is the only way here: SQLite
 * never loses the answer of a commit it made, so the fault is injected by a forwarding store (it says so).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthError } from '../../schemas/errors.ts';
import { ActorRuntime } from '../../src/actors/actor-runtime.ts';
import type { AppendOptions, EventData, ReadStreamOptions } from '../../src/store/event-store.ts';
import { ForwardingEventStore } from '../../src/store/forwarding-event-store.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { counterActor, type CounterServices } from '../fixtures/actors/counter.actor.ts';

/** Fault injection (SQLite cannot lose an answer): an armed append lands or not, then the store is down for `downMs`. */
class LosingStore extends ForwardingEventStore {
  private armed?: { lands: boolean; downMs: number };
  private downUntil = 0;

  arm(lands: boolean, downMs: number): void {
    this.armed = { lands, downMs };
  }

  private down(): void {
    if (Date.now() < this.downUntil) throw new BerthError('unavailable', 'the store does not answer (injected)');
  }

  override async append(stream: string, events: EventData[], options: AppendOptions) {
    this.down();
    const fault = this.armed;
    if (!fault) return super.append(stream, events, options);
    this.armed = undefined;
    if (fault.lands) await super.append(stream, events, options);
    this.downUntil = Date.now() + fault.downMs;
    throw new BerthError('unavailable', 'the answer of the append was lost (injected)');
  }

  override async readStream(stream: string, options?: ReadStreamOptions) {
    this.down();
    return super.readStream(stream, options);
  }
}

let dir: string;
let sqlite: SqliteEventStore;
let store: LosingStore;
let rt: ActorRuntime<CounterServices>;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'berth-lost-answer-'));
  sqlite = SqliteEventStore.open(join(dir, 'events.sqlite3'));
  store = new LosingStore(sqlite);
  rt = new ActorRuntime<CounterServices>({ store, runtimeId: 'rt-lost', services: { inspected: [] }, settleMs: 10_000 });
  rt.register(counterActor);
  await rt.start();
});

afterEach(async () => {
  await rt.whenIdle();
  await sqlite.close();
  rmSync(dir, { recursive: true, force: true });
});

const types = async (stream: string) => (await sqlite.readStream(stream)).map((e) => e.type);

describe('an append whose answer is lost', () => {
  it('landed: the command succeeds once the store answers, and the effect of its transition runs once', async () => {
    await rt.send('counter', 'c1', { type: 'counter.incremented', by: 9 });
    // Crossing ten yields `announce`, whose outcome (counter.announced) is appended by the effect.
    store.arm(true, 1500);
    const result = await rt.send('counter', 'c1', { type: 'counter.incremented', by: 2 });
    expect(result.context.count).toBe(11);
    expect(result.revision).toBe(1n);
    await rt.whenIdle();
    expect(await types('counter-c1')).toEqual(['counter.incremented', 'counter.incremented', 'counter.announced']);
    expect((await rt.get('counter', 'c1'))?.context.announced).toEqual([11]);
  });

  it('did not land: the command fails unavailable and nothing ran', async () => {
    await rt.send('counter', 'c2', { type: 'counter.incremented', by: 9 });
    // Down longer than the runtime's own retries of the append (about 0.5 s), then back: the log shows nothing.
    store.arm(false, 1500);
    await expect(rt.send('counter', 'c2', { type: 'counter.incremented', by: 2 })).rejects.toMatchObject({ code: 'unavailable' });
    await rt.whenIdle();
    expect(await types('counter-c2')).toEqual(['counter.incremented']);
    // The actor is as it was: the next command decides on the state the log holds.
    expect((await rt.send('counter', 'c2', { type: 'counter.incremented', by: 1 })).context.count).toBe(10);
  });
});

describe('an effect whose outcome could not be recorded', () => {
  it('leaves its actor stranded until redriveStranded reconciles it, once the store answers', async () => {
    const short = new ActorRuntime<CounterServices>({ store, runtimeId: 'rt-lost', services: { inspected: [] }, settleMs: 200 });
    short.register(counterActor);
    await short.start();
    await short.send('counter', 'c3', { type: 'counter.incremented', by: 5 });
    // Crossing ten yields `announce`; its outcome meets a store that is down for longer than the runtime settles for.
    await short.send('counter', 'c3', { type: 'counter.incremented', by: 5 });
    const downUntil = Date.now() + 3_000;
    store.arm(false, 3_000);
    await short.whenIdle();
    expect(Date.now()).toBeLessThan(downUntil);
    // The store still fails: the re-drive keeps the actor for later.
    expect(await short.redriveStranded(0)).toBe(0);
    await new Promise((r) => setTimeout(r, downUntil - Date.now() + 50));
    expect(await short.redriveStranded(0)).toBe(1);
    await short.whenIdle();
    const events = await sqlite.readStream('counter-c3');
    expect(events.map((e) => e.type)).toEqual(['counter.incremented', 'counter.incremented', 'runtime.recovered']);
    expect(short.stats.effectsFailed).toBe(0);
    // Reconciled once: nothing is left stranded.
    expect(await short.redriveStranded(0)).toBe(0);
  });
});
