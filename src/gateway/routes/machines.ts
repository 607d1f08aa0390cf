/** `GET /v1/machines/{kind}`: an actor type's statechart (states, transitions, events), read from the machine it runs. */
import { z } from 'zod';
import { machineKindParams, machineStructureSchema } from '../../../schemas/console.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const machinesPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/machines/{kind}',
      summary: "An actor type's statechart, computed from its XState machine",
      params: machineKindParams,
      responses: { 200: { description: 'States (dotted paths), transitions and the events the machine takes', schema: machineStructureSchema } },
    },
    async ({ deps, params }) => deps.api.machine(params.kind),
  ),
]);
