/**
 * `GET /v1/runtimes` and `POST /v1/runtimes/{runtimeId}/retire` (admin only): the runtimes sharing the event store,
 * and the retirement of one, whose unfinished actors the receiving runtime adopts (issue #17).
 */
import { z } from 'zod';
import { retirementReportSchema, runtimeStatusSchema } from '../../../schemas/api.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const runtimesPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/runtimes',
      summary: 'The runtimes sharing the event store (admin only)',
      responses: { 200: { description: 'Every runtime that started on this store', schema: z.array(runtimeStatusSchema) } },
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
          schema: retirementReportSchema,
        },
      },
    },
    async ({ deps, caller, params }) => deps.api.retireRuntime(caller, params.runtimeId),
  ),
]);
