/** `GET /v1/projections` and `POST /v1/projections/{name}/rebuild`: the read models' state, and a rebuild after a fix (admin only). */
import { z } from 'zod';
import { defineRoute, resourcePlugin } from '../route.ts';

const projectionSchema = z.object({
  name: z.string(),
  position: z.string().describe('Global position of the last event it reflects'),
  lag: z.string().describe('Events between the log head and this model'),
  failed: z.object({ position: z.string(), message: z.string() }).nullable().describe('Why it answers projection_failed, until rebuilt'),
});

export const projectionsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/projections',
      summary: 'The read models: position, lag, and failure (admin only)',
      responses: { 200: { description: 'Every read model', schema: z.array(projectionSchema) } },
    },
    async ({ deps, caller }) => deps.api.projections(caller),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/projections/{name}/rebuild',
      summary: 'Recompute one read model from the first event (admin only), e.g. after a fix for the event it failed on',
      params: z.strictObject({ name: z.string().regex(/^[a-z][a-z0-9_-]{0,63}$/) }),
      body: z.strictObject({}).optional(),
      responses: { 200: { description: 'The rebuilt read model', schema: projectionSchema } },
    },
    async ({ deps, caller, params }) => deps.api.rebuildProjection(caller, params.name),
  ),
]);
