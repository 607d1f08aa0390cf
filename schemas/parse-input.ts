/**
 * The one place input is validated: every path parameter, query, body, header and WebSocket control frame of the
 * gateway, and what the CLI hands its in-process runtime, goes through `parseOrReject`, which turns zod issues into a
 * BerthError `invalid_request` (DESIGN §8 error shape). Both say the same sentence for the same mistake.
 */
import type { z } from 'zod';
import { BerthError } from './errors.ts';

export type InputPart = 'params' | 'query' | 'body' | 'header' | 'frame';

const MAX_ISSUES = 20;

export function parseOrReject<S extends z.ZodType>(schema: S, value: unknown, part: InputPart): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  // Issues carry paths and messages, never the offending input, so a huge or secret value is not echoed back.
  const issues = result.error.issues.slice(0, MAX_ISSUES).map((issue) => ({
    path: issue.path.map(String).join('.').slice(0, 200),
    code: issue.code,
    message: issue.message.slice(0, 300),
  }));
  const first = issues[0];
  const where = first?.path ? `${part}.${first.path}` : part;
  throw new BerthError('invalid_request', `Invalid ${where}: ${first?.message ?? 'malformed input'}`, { part, issues });
}
