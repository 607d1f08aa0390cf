/**
 * Two runtimes on one SQLite store file, each with its own data directory (issue #17): they see each other in the
 * runtimes model, a command on the other's actor is refused naming where it answers, and a retirement adopts the
 * retired runtime's unfinished actors, reconciles them on the adopter and fences the retired one at its next write.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BerthRuntime } from '../../../src/runtime/core/berth-runtime.ts';
import { counterActor, type CounterServices } from '../../fixtures/actors/counter.actor.ts';

let dir: string;
const running: BerthRuntime<CounterServices>[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'berth-retire-'));
});
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A runtime with its own data directory (kept when it starts again) on the shared store file. */
async function start(runtimeId: string) {
  const dataDir = join(dir, runtimeId);
  mkdirSync(dataDir, { recursive: true }); // kept across a restart
  const services: CounterServices = { inspected: [] };
  const runtime = await BerthRuntime.start<CounterServices>({
    settings: { dataDir, store: `sqlite:${join(dir, 'shared.sqlite3')}`, maintenanceMs: 60_000 },
    runtimeId,
    actorTypes: [counterActor],
    projections: [],
    services,
  });
  running.push(runtime);
  return { runtime, services };
}

const inc = (by: number) => ({ type: 'counter.incremented', by });

describe('runtimes sharing one store', () => {
  it('list each other, refuse each other\'s actors with the owner\'s URL, and hand work over by retirement', async () => {
    const a = await start('rt-a');
    const b = await start('rt-b');
    await a.runtime.announce('http://127.0.0.1:7001');
    await a.runtime.actors.send('counter', 'c1', inc(1));
    await b.runtime.projections.catchUp();
    expect(b.runtime.runtimes().map((r) => [r.runtimeId, r.state, r.url])).toEqual([
      ['rt-a', 'serving', 'http://127.0.0.1:7001'],
      ['rt-b', 'started', null],
    ]);
    await expect(b.runtime.actors.send('counter', 'c1', inc(1))).rejects.toMatchObject({
      code: 'owned_elsewhere',
      detail: { runtimeId: 'rt-a', url: 'http://127.0.0.1:7001' },
    });

    await expect(b.runtime.retire('rt-b')).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(b.runtime.retire('rt-none')).rejects.toMatchObject({ code: 'not_found' });
    expect(await b.runtime.retire('rt-a')).toMatchObject({ adopted: 1, recovered: 1, failed: 0 });
    await b.runtime.actors.whenIdle();
    // Reconciled on the adopter: its inspection effect ran there, with the count A left.
    expect(b.services.inspected).toEqual([{ id: 'c1', count: 1 }]);
    expect(a.services.inspected).toEqual([]);
    // A, still running, can write c1 no more; B now can. A second retirement finds nothing left to adopt.
    await expect(a.runtime.actors.send('counter', 'c1', inc(1))).rejects.toMatchObject({ code: 'owned_elsewhere', detail: { runtimeId: 'rt-b' } });
    expect((await b.runtime.actors.send('counter', 'c1', inc(1))).context.count).toBe(2);
    expect(await b.runtime.retire('rt-a')).toMatchObject({ adopted: 0 });

    await a.runtime.stop();
    running.splice(running.indexOf(a.runtime), 1);
    await b.runtime.projections.catchUp();
    expect(b.runtime.runtimes().find((r) => r.runtimeId === 'rt-a')).toMatchObject({ state: 'retired', retiredBy: 'rt-b' });

    // A started again owns nothing: it recovers none of what B adopted.
    const again = await start('rt-a');
    expect(again.runtime.recovery.recovered).toBe(0);
    expect(again.runtime.identity.epoch).toBe(2);
  });

  it('records a clean stop, and the next start serves again', async () => {
    const a = await start('rt-a');
    const b = await start('rt-b');
    await b.runtime.stop();
    running.splice(running.indexOf(b.runtime), 1);
    await a.runtime.projections.catchUp();
    expect(a.runtime.runtimes().find((r) => r.runtimeId === 'rt-b')).toMatchObject({ state: 'stopped', epoch: 1 });
    const b2 = await start('rt-b');
    await b2.runtime.announce('http://127.0.0.1:7002');
    await a.runtime.projections.catchUp();
    expect(a.runtime.runtimes().find((r) => r.runtimeId === 'rt-b')).toMatchObject({ state: 'serving', epoch: 2, url: 'http://127.0.0.1:7002' });
  });
});
