/**
 * Two runtimes in two processes (different runtimeIds) hammer the same counters on one SQLite file. Nothing is lost
 * and nothing is written twice: each counter's final state is the serial application of every accepted increment,
 * and each counter is written by one runtime only, its owner (issue 17): the first to write it; the other's commands
 * on it are refused (owned_elsewhere), including one that lost the first race and re-decided on the owner's event.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ActorRuntime } from '../../src/actors/actor-runtime.ts';
import { SqliteEventStore } from '../../src/store/sqlite-event-store.ts';
import { counterActor, type CounterServices } from '../fixtures/actors/counter.actor.ts';

const ACTORS = 4;
const INCREMENTS = 150;
const child = join(import.meta.dirname, '../fixtures/actors/counter-contention-child.ts');

let dir: string;
beforeAll(() => void (dir = mkdtempSync(join(tmpdir(), 'berth-actor-contention-'))));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface ChildReport {
  accepted: Record<string, string[]>;
  gaveUp: number;
  elsewhere: number;
  wrongExpectedVersion: number;
}

function contender(runtimeId: string) {
  const p = spawn(process.execPath, ['--import', 'tsx', child], {
    env: {
      ...process.env,
      CONTENTION_DB: join(dir, 'events.sqlite3'),
      CONTENTION_RUNTIME_ID: runtimeId,
      CONTENTION_ACTORS: String(ACTORS),
      CONTENTION_INCREMENTS: String(INCREMENTS),
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  p.stderr.on('data', (b: Buffer) => (err = (err + b.toString()).slice(-4000)));
  const ready = new Promise<void>((resolve) =>
    p.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('ready\n')) resolve();
    }),
  );
  const done = new Promise<ChildReport>((resolve, reject) =>
    p.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${runtimeId} exited ${code}:\n${err}`));
      resolve(JSON.parse(out.split('\n').filter(Boolean).pop()!));
    }),
  );
  return { ready, done, go: () => p.stdin.end('go\n') };
}

describe('two runtimes contending for the same actors', () => {
  it('loses no update and makes the loser re-decide', { timeout: 90_000 }, async () => {
    const a = contender('contender-a');
    const b = contender('contender-b');
    await Promise.all([a.ready, b.ready]);
    a.go();
    b.go();
    const reports = await Promise.all([a.done, b.done]);

    const store = SqliteEventStore.open(join(dir, 'events.sqlite3'));
    const fresh = new ActorRuntime<CounterServices>({ store, runtimeId: 'checker', services: { inspected: [] } });
    fresh.register(counterActor);
    for (let i = 0; i < ACTORS; i++) {
      const id = `shared-${i}`;
      const events = await store.readStream(`counter-${id}`);
      const increments = events.filter((e) => e.type === 'counter.incremented');
      const acceptedIds = reports.flatMap((r) => r.accepted[id]);
      // Every accepted increment is in the stream exactly once, and nothing else is.
      expect(new Set(acceptedIds).size).toBe(acceptedIds.length);
      expect(increments.map((e) => e.id).sort()).toEqual([...acceptedIds].sort());
      // The state is the serial application of the stream, and both runtimes wrote to it.
      const serial = increments.reduce((n, e) => n + (e.data as { by: number }).by, 0);
      expect((await fresh.get('counter', id))?.context.count).toBe(serial);
      expect(new Set(increments.map((e) => e.metadata.runtimeId)).size).toBe(1);
      expect(events.map((e) => e.revision)).toEqual(events.map((_, r) => BigInt(r)));
    }
    await store.close();

    const retries = reports.reduce((n, r) => n + r.wrongExpectedVersion, 0);
    const gaveUp = reports.reduce((n, r) => n + r.gaveUp, 0);
    const elsewhere = reports.reduce((n, r) => n + r.elsewhere, 0);
    console.log(`actor-contention: ${JSON.stringify({ retries, gaveUp, elsewhere, accepted: reports.map((r) => Object.values(r.accepted).flat().length) })}`);
    // Each counter's non-owner was refused every command it sent after the owner's first write.
    expect(elsewhere).toBeGreaterThan(0);
    expect(reports.flatMap((r) => Object.values(r.accepted).flat()).length + gaveUp + elsewhere).toBe(2 * ACTORS * INCREMENTS);
  });
});
