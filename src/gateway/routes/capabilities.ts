/** `GET /v1/capabilities`: what this server supports. */
import { capabilitiesSchema } from '../../../schemas/api.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const capabilitiesPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/capabilities',
      summary: 'What this server supports',
      responses: { 200: { description: 'Capability flags', schema: capabilitiesSchema } },
    },
    async ({ deps }) => ({ capabilities: deps.api.capabilities() }),
  ),
]);
