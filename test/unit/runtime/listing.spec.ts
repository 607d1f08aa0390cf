/** The page cursor's codec and the page query's checks: a cursor round-trips, anything else is a typed 400. */
import { describe, expect, it } from 'vitest';
import { isBerthError } from '../../../schemas/errors.ts';
import { decodeCursor, encodeCursor, listingOf, pageRange } from '../../../src/runtime/listing.ts';

const rejected = (f: () => unknown): unknown => {
  try {
    f();
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
};

describe('listing', () => {
  it('a cursor carries the seq it was made from, as url-safe text that does not show it plainly', () => {
    for (const seq of [1, 99, 2 ** 31, Number.MAX_SAFE_INTEGER]) {
      const cursor = encodeCursor(seq);
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(cursor).not.toContain(String(seq));
      expect(decodeCursor(cursor)).toBe(seq);
    }
  });

  it.each([
    ['empty', ''],
    ['a bare number', '42'],
    ['not base64url', 'a+b/c=='],
    ['another version', Buffer.from('c2.42').toString('base64url')],
    ['a seq of 0', Buffer.from('c1.0').toString('base64url')],
    ['a negative seq', Buffer.from('c1.-5').toString('base64url')],
    ['trailing bytes', Buffer.from('c1.42x').toString('base64url')],
    ['beyond a safe integer', Buffer.from('c1.9999999999999999').toString('base64url')],
    ['huge', 'A'.repeat(10_000)],
  ])('a cursor that is %s is invalid_request, echoing at most 64 characters', (_what, cursor) => {
    const e = rejected(() => decodeCursor(cursor));
    expect(isBerthError(e, 'invalid_request')).toBe(true);
    expect(String((e as { detail: { cursor: string } }).detail.cursor).length).toBeLessThanOrEqual(64);
  });

  it('a page query defaults to 100 oldest first, and refuses a limit outside 1..1000', () => {
    expect(pageRange()).toEqual({ limit: 100, order: 'asc' });
    expect(pageRange({ limit: 1000, order: 'desc', cursor: encodeCursor(7) })).toEqual({ limit: 1000, order: 'desc', after: 7 });
    for (const limit of [0, -1, 1001, 1.5, Number.NaN]) expect(isBerthError(rejected(() => pageRange({ limit })), 'invalid_request')).toBe(true);
  });

  it("a listing carries the page's next seq as a cursor, and none on the last page", () => {
    expect(listingOf({ rows: [1, 2], next: 12 }, ['a', 'b'])).toEqual({ items: ['a', 'b'], next: encodeCursor(12) });
    expect(listingOf({ rows: [3] }, ['c'])).toEqual({ items: ['c'] });
  });
});
