/** Environment CRUD with profile (seed 001 §2; DESIGN §8). The content protocol (files, import, build) is elsewhere. */
import { z } from 'zod';
import { createEnvironmentBody, environmentSchema, idParams, listQuery, updateEnvironmentBody } from '../../../schemas/api.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const environmentsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'POST',
      path: '/v1/environments',
      summary: 'Create an environment (defining one never allocates compute)',
      body: createEnvironmentBody,
      status: 201,
      responses: { 201: { description: 'The environment', schema: environmentSchema } },
    },
    async ({ deps, caller, body }) => deps.api.createEnvironment(caller, body),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/environments',
      summary: "List the caller's environments",
      query: listQuery,
      responses: { 200: pagedResponse('Environments', z.array(environmentSchema)) },
    },
    async ({ deps, caller, query, reply }) => sendPage(reply, await deps.api.listEnvironments(caller, query)),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/environments/{id}',
      summary: 'One environment',
      params: idParams,
      responses: { 200: { description: 'The environment', schema: environmentSchema } },
    },
    async ({ deps, caller, params }) => deps.api.getEnvironment(caller, params.id),
  ),
  defineRoute(
    {
      method: 'PUT',
      path: '/v1/environments/{id}',
      summary: 'Rename; change description, entry or profile (new allocations only)',
      params: idParams,
      body: updateEnvironmentBody,
      responses: { 200: { description: 'The environment', schema: environmentSchema } },
    },
    async ({ deps, caller, params, body }) => deps.api.updateEnvironment(caller, params.id, body),
  ),
  defineRoute(
    {
      method: 'DELETE',
      path: '/v1/environments/{id}',
      summary: 'Delete an environment and every version',
      params: idParams,
      responses: { 204: { description: 'Deleted' } },
    },
    async ({ deps, caller, params }) => {
      await deps.api.deleteEnvironment(caller, params.id);
      return undefined;
    },
  ),
]);
