/**
 * The client retries its idempotent requests through one wrapper (`berth.retry`, made by `retrier` from the client's
 * backoff): no other module of the client calls `retrying` with a backoff of its own, and the wrapper retries a
 * transient fault with the same request while a 4xx answer is final.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BerthApiError } from '../../../src/client/berth-api-error.ts';
import { retrier } from '../../../src/client/retry.ts';

const clientDir = new URL('../../../src/client/', import.meta.url);

describe('the client retry wrapper', () => {
  it('is the only caller of retrying in the client', () => {
    const callers = readdirSync(clientDir)
      .filter((f) => f.endsWith('.ts') && f !== 'retry.ts')
      .filter((f) => /\bretrying\(/.test(readFileSync(new URL(f, clientDir), 'utf8')));
    expect(callers).toEqual([]);
  });

  it('retries a transient fault with the same request and gives a 4xx answer back at once', async () => {
    const retry = retrier({ initialMs: 1, maxMs: 2 });
    let calls = 0;
    const flaky = () => (++calls < 3 ? Promise.reject(new TypeError('fetch failed')) : Promise.resolve('done'));
    expect(await retry(flaky)).toBe('done');
    expect(calls).toBe(3);
    let refused = 0;
    const final = () => (refused++, Promise.reject(new BerthApiError(404, 'not_found', 'No such lease.')));
    await expect(retry(final)).rejects.toMatchObject({ code: 'not_found' });
    expect(refused).toBe(1);
  });
});
