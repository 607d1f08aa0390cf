/**
 * Pages of a list: what every listing of the runtime API returns (`Listing<T>`: one page of items and the opaque
 * cursor of the next), and the cursor's codec. A cursor carries a read-model row's insertion `seq`, which is never
 * reused, so a walk page by page sees each row once however many rows are inserted meanwhile.
 */
import { BerthError } from '../../schemas/errors.ts';
import { PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX } from '../../schemas/api.ts';
import type { Page } from '../projections/projection.ts';

export interface Listing<T> {
  items: T[];
  /** The cursor of the next page, when more items may follow. */
  next?: string;
}

/** What a caller asks of a list: all optional (default limit, first page, oldest first). */
export interface PageQuery {
  limit?: number;
  cursor?: string;
  order?: 'asc' | 'desc';
}

/** A page query checked and decoded: what a read model's `page` takes. */
export interface PageRange {
  after?: number;
  limit: number;
  order: 'asc' | 'desc';
}

/** Versioned, so the encoding can change without old cursors being read as something else. */
const PREFIX = 'c1.';
const SEQ = /^c1\.([1-9]\d{0,15})$/;

export const encodeCursor = (seq: number): string => Buffer.from(`${PREFIX}${seq}`).toString('base64url');

/** The seq a cursor carries; a cursor this server did not make is `invalid_request`. */
export function decodeCursor(cursor: string): number {
  const seq = /^[A-Za-z0-9_-]{1,64}$/.test(cursor) ? SEQ.exec(Buffer.from(cursor, 'base64url').toString('latin1'))?.[1] : undefined;
  if (seq === undefined || !Number.isSafeInteger(Number(seq))) {
    throw new BerthError('invalid_request', 'The cursor is not one this server gave: pass the x-berth-next-cursor of a previous page.', { cursor: cursor.slice(0, 64) });
  }
  return Number(seq);
}

/** Checks the limit (in-process callers skip the gateway's schema) and decodes the cursor. */
export function pageRange(query: PageQuery = {}): PageRange {
  const limit = query.limit ?? PAGE_LIMIT_DEFAULT;
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_LIMIT_MAX) {
    throw new BerthError('invalid_request', `A page's limit is an integer from 1 to ${PAGE_LIMIT_MAX}.`, { limit });
  }
  return { limit, order: query.order ?? 'asc', ...(query.cursor !== undefined ? { after: decodeCursor(query.cursor) } : {}) };
}

/** The listing of a read model's page whose rows became `items`: the page's cursor, encoded. */
export const listingOf = <T>(page: Page<unknown>, items: T[]): Listing<T> => ({
  items,
  ...(page.next !== undefined ? { next: encodeCursor(page.next) } : {}),
});
