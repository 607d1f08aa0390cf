/** `GET /v1/catalog`: the scope's environments as the catalog projection sees them. */
import { z } from 'zod';
import { environmentSchema, listQuery } from '../../../schemas/api.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const catalogPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/catalog',
      summary: 'The environment catalog of the scope',
      query: listQuery,
      responses: { 200: pagedResponse('Environments', z.array(environmentSchema)) },
    },
    async ({ deps, caller, query, reply }) => sendPage(reply, await deps.api.catalog(caller, query)),
  ),
]);
