/** Allocations: acquire, list and release an environment's allocations, and the active-allocation index. */
import { z } from 'zod';
import { allocationParams, allocationSchema, idParams, listQuery } from '../../../schemas/api.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const allocationsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'POST',
      path: '/v1/environments/{id}/allocations',
      summary: 'Acquire an allocation (coalesces with one under way)',
      params: idParams,
      status: 201,
      responses: { 201: { description: 'The allocation', schema: allocationSchema } },
    },
    async ({ deps, caller, params }) => deps.api.acquire(caller, params.id),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/environments/{id}/allocations',
      summary: "An environment's allocations",
      params: idParams,
      query: listQuery,
      responses: { 200: pagedResponse('Allocations', z.array(allocationSchema)) },
    },
    async ({ deps, caller, params, query, reply }) => sendPage(reply, await deps.api.listAllocations(caller, params.id, query)),
  ),
  defineRoute(
    {
      method: 'DELETE',
      path: '/v1/environments/{id}/allocations/{allocationId}',
      summary: 'Release an allocation (refused while it has uses)',
      params: allocationParams,
      responses: { 200: { description: 'The allocation, releasing or released', schema: allocationSchema } },
    },
    async ({ deps, caller, params }) => deps.api.release(caller, params.id, params.allocationId),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/allocations',
      summary: 'The active-allocation index of the scope',
      query: listQuery,
      responses: { 200: pagedResponse('Active allocations', z.array(allocationSchema)) },
    },
    async ({ deps, caller, query, reply }) => sendPage(reply, await deps.api.activeAllocations(caller, query)),
  ),
]);
