/**
 * Pages of a list: one page is its items and the cursor of the next (`next`, absent on the last page); `everyItem`
 * walks from a first page to the last, one request per page. Over HTTP the cursor travels in `x-berth-next-cursor`.
 */
import { NEXT_CURSOR_HEADER } from '../../schemas/api.ts';
import type { HttpTransport } from './http-transport.ts';

export interface Page<T> {
  items: T[];
  /** Pass as `cursor` to read the next page; absent on the last page. */
  next?: string;
}

export interface PageOptions {
  /** Items per page, 1 to 1000 (the server's default: 100). */
  limit?: number;
  /** The `next` of a previous page. */
  cursor?: string;
  /** `asc` (default): oldest first. */
  order?: 'asc' | 'desc';
}

/** Reads one page of a list route. */
export async function readPage<T>(http: HttpTransport, path: string, query: Record<string, string | number | undefined>): Promise<Page<T>> {
  const response = await http.send('GET', path, { query });
  const next = response.headers.get(NEXT_CURSOR_HEADER);
  return { items: (await response.json()) as T[], ...(next ? { next } : {}) };
}

/** Every item from the page at `cursor` (default: the first) to the last page. */
export async function* everyItem<T>(page: (cursor: string | undefined) => Promise<Page<T>>, cursor?: string): AsyncGenerator<T> {
  for (let next = cursor, first = true; first || next !== undefined; first = false) {
    const current = await page(next);
    yield* current.items;
    next = current.next;
  }
}

/** Every item of a walk, in one array: for lists the caller means to hold whole. */
export async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}
