/** `GET /v1/activity`: executions and operations with status and structured failure, never payloads. */
import { activitySchema, listQuery } from '../../../schemas/api.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const activityPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/activity',
      summary: 'Executions and operations of the scope',
      query: listQuery,
      responses: { 200: pagedResponse('Activity entries', activitySchema) },
    },
    async ({ deps, caller, query, reply }) => sendPage(reply, await deps.api.activity(caller, query)),
  ),
]);
