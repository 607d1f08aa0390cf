/** `GET /v1/catalog`: the scope's environments as the catalog projection sees them. */
import { z } from 'zod';
import { environmentSchema } from '../../../schemas/api.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const catalogPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/catalog',
      summary: 'The environment catalog of the scope',
      responses: { 200: { description: 'Environments', schema: z.array(environmentSchema) } },
    },
    async ({ deps, caller }) => deps.api.catalog(caller),
  ),
]);
