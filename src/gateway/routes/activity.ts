/** `GET /v1/activity`: executions and operations with status and structured failure, never payloads. */
import { activitySchema } from '../../../schemas/api.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const activityPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/activity',
      summary: 'Executions and operations of the scope',
      responses: { 200: { description: 'Activity entries', schema: activitySchema } },
    },
    async ({ deps, caller }) => deps.api.activity(caller),
  ),
]);
