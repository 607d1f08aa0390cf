import { describe, expect, it } from 'vitest';
import { BufferBudget } from '../../../src/runtime/workspaces/buffer-budget.ts';

/** A call that holds its share until `release` is called, recording when it started. */
function held(budget: BufferBudget, bytes: number, started: number[], id: number) {
  let release!: () => void;
  const done = budget.holding(bytes, () => {
    started.push(id);
    return new Promise<void>((r) => (release = r));
  });
  return { done, release: () => release() };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('BufferBudget', () => {
  it('runs calls that fit at once, makes the rest wait in order, and gives bytes back as each settles', async () => {
    const budget = new BufferBudget(100);
    const started: number[] = [];
    const a = held(budget, 60, started, 1);
    const b = held(budget, 40, started, 2);
    const c = held(budget, 30, started, 3);
    const d = held(budget, 10, started, 4); // fits, but waits behind c: first come, first served
    await tick();
    expect(started).toEqual([1, 2]);
    expect(budget.held).toBe(100);
    a.release();
    await a.done;
    await tick();
    expect(started).toEqual([1, 2, 3, 4]);
    expect(budget.held).toBe(80);
    for (const x of [b, c, d]) x.release();
    await Promise.all([b.done, c.done, d.done]);
    expect(budget.held).toBe(0);
  });

  it('runs a call larger than the whole budget alone', async () => {
    const budget = new BufferBudget(100);
    const started: number[] = [];
    const small = held(budget, 10, started, 1);
    const huge = held(budget, 500, started, 2);
    await tick();
    expect(started).toEqual([1]);
    small.release();
    await small.done;
    await tick();
    expect(started).toEqual([1, 2]);
    expect(budget.held).toBe(100);
    huge.release();
    await huge.done;
    expect(budget.held).toBe(0);
  });

  it('gives the bytes back when the work throws', async () => {
    const budget = new BufferBudget(100);
    await expect(budget.holding(100, async () => Promise.reject(new Error('failed')))).rejects.toThrow('failed');
    expect(budget.held).toBe(0);
    expect(await budget.holding(100, async () => 'next')).toBe('next');
  });
});
