/**
 * Mailboxes: one key's jobs run one at a time in posting order, whatever each does; different keys overlap; a job
 * that fails (rejects or throws) still lets the next run; a drained key is forgotten.
 */
import { describe, expect, it } from 'vitest';
import { Mailboxes } from '../../../src/actors/mailbox.ts';

const tick = () => new Promise<void>((r) => setImmediate(r));

describe('Mailboxes', () => {
  it('runs one key strictly in order, never two at once, and overlaps different keys', async () => {
    const boxes = new Mailboxes();
    const log: string[] = [];
    let running = 0;
    const job = (key: string, n: number) => async () => {
      running++;
      log.push(`${key}${n}+`);
      if (n % 2 === 0) await tick();
      log.push(`${key}${n}-`);
      running--;
      return n;
    };
    const a = [0, 1, 2, 3].map((n) => boxes.post('a', job('a', n)));
    const b = boxes.post('b', job('b', 0));
    expect(boxes.size).toBe(2);
    expect(await Promise.all(a)).toEqual([0, 1, 2, 3]);
    expect(await b).toBe(0);
    const aOnly = log.filter((x) => x.startsWith('a'));
    expect(aOnly).toEqual(['a0+', 'a0-', 'a1+', 'a1-', 'a2+', 'a2-', 'a3+', 'a3-']);
    // b started while a0 was still waiting: keys do not wait for each other.
    expect(log.indexOf('b0+')).toBeLessThan(log.indexOf('a0-'));
    expect(running).toBe(0);
    await tick();
    expect(boxes.size).toBe(0);
  });

  it('does not start a job inside the caller’s turn', () => {
    const boxes = new Mailboxes();
    let started = false;
    void boxes.post('a', async () => {
      started = true;
    });
    expect(started).toBe(false);
  });

  it('keeps going after a job rejects or throws, and hands each caller its own outcome', async () => {
    const boxes = new Mailboxes();
    const rejected = boxes.post('a', async () => {
      throw new Error('rejected');
    });
    const thrown = boxes.post('a', (() => {
      throw new Error('thrown');
    }) as () => Promise<never>);
    const after = boxes.post('a', async () => 'ran');
    await expect(rejected).rejects.toThrow('rejected');
    await expect(thrown).rejects.toThrow('thrown');
    expect(await after).toBe('ran');
    expect(boxes.size).toBe(0);
  });
});
