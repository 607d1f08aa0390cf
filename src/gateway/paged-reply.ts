/**
 * List routes answer one page: its items as the JSON array (what callers of an unpaged list already read) and the
 * next page's cursor in the `x-berth-next-cursor` header, absent on the last page. Also that response's OpenAPI.
 */
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { NEXT_CURSOR_HEADER, PAGE_LIMIT_DEFAULT, PAGE_LIMIT_MAX } from '../../schemas/api.ts';
import type { Listing } from '../runtime/listing.ts';
import type { ResponseSpec } from './route.ts';

export const pagedResponse = (description: string, items: z.ZodType): ResponseSpec => ({
  description: `${description}: one page (\`limit\` from 1 to ${PAGE_LIMIT_MAX}, default ${PAGE_LIMIT_DEFAULT}; \`cursor\` from the previous page's header)`,
  schema: items,
  headers: {
    [NEXT_CURSOR_HEADER]: { description: 'The `cursor` of the next page; absent on the last page', schema: z.string() },
  },
});

export function sendPage<T>(reply: FastifyReply, listing: Listing<T>): T[] {
  if (listing.next !== undefined) reply.header(NEXT_CURSOR_HEADER, listing.next);
  return listing.items;
}
