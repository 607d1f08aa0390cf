/**
 * A member growing the server's memory for good with ordinary executions (DESIGN §13): a finished execution's actor
 * stays in the runtime's actor cache, and its context holds its command, which may be as large as the 1 MiB request
 * body. The cache counted entries only (20,000 of them), so executions of ~960 KB commands kept about 1 MB each, for
 * good (a real server grew 3.9 MB of RSS per such execution, the actor cache's share about 1 MB; up to 20 GB). The
 * cache now also weighs each entry's context and keeps at most its byte budget. Measured on the cache itself, with the
 * garbage collector run before each reading, so what is counted is what stays reachable.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import type { AnyMachineSnapshot } from 'xstate';
import { ActorCache } from '../../src/actors/actor-cache.ts';
import type { LoadedActor } from '../../src/actors/rehydrate.ts';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const MB = 1_000_000;
const MiB = 1024 * 1024;

function heapAfterGc(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

/** A flat string of `n` characters, its own (as a parsed request's are: `repeat` would share one rope). */
const flat = (n: number, i: number) => Buffer.alloc(n, 97 + (i % 26)).toString('latin1');

/** A finished execution as the cache holds it: its context keeps its command (16 arguments of 60,000 characters). */
const execution = (i: number): LoadedActor => ({
  snapshot: { value: 'exited', context: { id: `hexe_${i}`, command: ['true', ...Array.from({ length: 16 }, () => flat(60_000, i))] } } as unknown as AnyMachineSnapshot,
  revision: 5n,
});

it('should keep at most its byte budget of actors, however large their contexts', () => {
  const cache = new ActorCache(20_000, 16 * MiB);
  const before = heapAfterGc();
  for (let i = 0; i < 64; i++) cache.put(`execution-hexe_${i}`, execution(i));
  const kept = heapAfterGc() - before;
  console.log(`64 executions of ~960 KB commands: +${(kept / MB).toFixed(1)} MB kept by the cache (${(cache.bytes / MB).toFixed(1)} MB by its weights)`);
  // Before: about 64 MB (every entry kept). After: the 16 MiB budget.
  expect(cache.bytes).toBeLessThanOrEqual(16 * MiB);
  expect(kept).toBeLessThan(20 * MB);
  // The most recent are the ones kept; the oldest went first.
  expect(cache.get('execution-hexe_63')).toBeDefined();
  expect(cache.get('execution-hexe_0')).toBeUndefined();
});

it('should still keep its count of small actors, and one actor larger than the whole budget alone', () => {
  const cache = new ActorCache(1000, 16 * MiB);
  for (let i = 0; i < 1500; i++) cache.put(`tally-${i}`, { snapshot: { value: 'open', context: { total: i } } as unknown as AnyMachineSnapshot, revision: 1n });
  expect(cache.get('tally-499')).toBeUndefined();
  expect(cache.get('tally-500')).toBeDefined();
  const huge: LoadedActor = { snapshot: { value: 'open', context: { blob: flat(20 * MiB, 0) } } as unknown as AnyMachineSnapshot, revision: 1n };
  cache.put('huge-1', huge);
  expect(cache.get('huge-1')).toBe(huge);
  expect(cache.get('tally-1499')).toBeUndefined();
  expect(cache.bytes).toBeLessThanOrEqual(16 * MiB);
});
