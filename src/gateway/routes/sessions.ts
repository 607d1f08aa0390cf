/** Sessions: bind an environment (and optionally a workspace at its generation, with a cwd) for a series of executions; allocates nothing. */
import { createSessionBody, idParams, sessionSchema } from '../../../schemas/api.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const sessionsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'POST',
      path: '/v1/sessions',
      summary: 'Create a session',
      body: createSessionBody,
      environmentRef: 'body.environmentId',
      status: 201,
      responses: { 201: { description: 'The session', schema: sessionSchema } },
    },
    async ({ deps, caller, body }) => deps.api.createSession(caller, body),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/sessions/{id}',
      summary: 'One session',
      params: idParams,
      responses: { 200: { description: 'The session', schema: sessionSchema } },
    },
    async ({ deps, caller, params }) => deps.api.getSession(caller, params.id),
  ),
  defineRoute(
    {
      method: 'DELETE',
      path: '/v1/sessions/{id}',
      summary: 'Delete a session: no new turn or command runs in it (its executions and turns keep their records)',
      params: idParams,
      responses: { 204: { description: 'Deleted' } },
    },
    async ({ deps, caller, params }) => {
      await deps.api.deleteSession(caller, params.id);
      return undefined;
    },
  ),
]);
