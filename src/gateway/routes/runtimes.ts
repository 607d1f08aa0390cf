/**
 * `GET /v1/runtimes` and `POST /v1/runtimes/{runtimeId}/retire` (admin only): the runtimes sharing the event store,
 * and the retirement of one, whose unfinished actors the receiving runtime adopts (issue #17).
 */
import { z } from 'zod';
import { defineRoute, resourcePlugin } from '../route.ts';

const runtimeSchema = z.object({
  runtimeId: z.string(),
  epoch: z.number().int(),
  state: z.enum(['started', 'serving', 'stopped', 'retired']).describe('started: fenced but not listening (or a CLI command\'s own runtime)'),
  url: z.string().nullable().describe('Where it answers, as it announced'),
  hostname: z.string(),
  pid: z.number().int(),
  startedAt: z.string(),
  retiredBy: z.string().nullable(),
  self: z.boolean().describe('The runtime answering this request'),
});

export const runtimesPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/runtimes',
      summary: 'The runtimes sharing the event store (admin only)',
      responses: { 200: { description: 'Every runtime that started on this store', schema: z.array(runtimeSchema) } },
    },
    async ({ deps, caller }) => deps.api.runtimes(caller),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/runtimes/{runtimeId}/retire',
      summary: 'Retire another runtime: this one adopts its unfinished actors and reconciles them (admin only)',
      params: z.strictObject({ runtimeId: z.string().regex(/^[A-Za-z0-9_-]{1,128}$/) }),
      body: z.strictObject({}).optional(),
      responses: {
        200: {
          description: 'What was adopted',
          schema: z.object({ runtimeId: z.string(), adopted: z.number().int(), recovered: z.number().int(), failed: z.number().int() }),
        },
      },
    },
    async ({ deps, caller, params }) => deps.api.retireRuntime(caller, params.runtimeId),
  ),
]);
