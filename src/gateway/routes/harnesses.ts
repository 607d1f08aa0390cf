/**
 * Harnesses (seed 001 §5): a named default whose environment tasks read; `POST /v1/executions {harness}` runs in it.
 * Naming an environment outside the caller's scope, or none that exists, is environment_not_found.
 */
import { z } from 'zod';
import { idParams, listQuery } from '../../../schemas/api.ts';
import { createHarnessBody, harnessSchema, updateHarnessBody } from '../../../schemas/content-api.ts';
import { contentOf, contentPlugin } from '../content-plugin.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute } from '../route.ts';

export const harnessesPlugin = contentPlugin([
  {
    body: 'json',
    routes: [
      defineRoute(
        {
          method: 'POST',
          path: '/v1/harnesses',
          summary: 'Create a harness',
          body: createHarnessBody,
          environmentRef: 'body.environment',
          status: 201,
          responses: { 201: { description: 'The harness', schema: harnessSchema } },
        },
        async ({ deps, caller, body, request }) => contentOf(deps, request.method, request.url).createHarness(caller, body),
      ),
      defineRoute(
        {
          method: 'GET',
          path: '/v1/harnesses',
          summary: "The caller's harnesses",
          query: listQuery,
          responses: { 200: pagedResponse('Harnesses', z.array(harnessSchema)) },
        },
        async ({ deps, caller, query, request, reply }) => sendPage(reply, await contentOf(deps, request.method, request.url).listHarnesses(caller, query)),
      ),
      defineRoute(
        {
          method: 'GET',
          path: '/v1/harnesses/{id}',
          summary: 'One harness',
          params: idParams,
          responses: { 200: { description: 'The harness', schema: harnessSchema } },
        },
        async ({ deps, caller, params, request }) => contentOf(deps, request.method, request.url).getHarness(caller, params.id),
      ),
      defineRoute(
        {
          method: 'PUT',
          path: '/v1/harnesses/{id}',
          summary: 'Rename; change base or environment (null clears)',
          params: idParams,
          body: updateHarnessBody,
          environmentRef: 'body.environment',
          responses: { 200: { description: 'The harness', schema: harnessSchema } },
        },
        async ({ deps, caller, params, body, request }) => contentOf(deps, request.method, request.url).updateHarness(caller, params.id, body),
      ),
      defineRoute(
        {
          method: 'DELETE',
          path: '/v1/harnesses/{id}',
          summary: 'Delete a harness',
          params: idParams,
          responses: { 204: { description: 'Deleted' } },
        },
        async ({ deps, caller, params, request }) => {
          await contentOf(deps, request.method, request.url).deleteHarness(caller, params.id);
          return undefined;
        },
      ),
      defineRoute(
        {
          method: 'GET',
          path: '/v1/environments/{id}/harnesses',
          summary: 'The harnesses that name this environment (what a rebuild will reach)',
          params: idParams,
          query: listQuery,
          responses: { 200: pagedResponse('Harnesses', z.array(harnessSchema)) },
        },
        async ({ deps, caller, params, query, request, reply }) =>
          sendPage(reply, await contentOf(deps, request.method, request.url).environmentHarnesses(caller, params.id, query)),
      ),
    ],
  },
]);
