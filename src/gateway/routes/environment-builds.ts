/**
 * Builds and versions (seed 001 §4): start the next build (answers at once), a build's record with the installers'
 * log, every version and which is active, and activation of a finished one (a rollback: nothing is rebuilt).
 */
import { idParams } from '../../../schemas/api.ts';
import { buildRecordSchema, versionListSchema, versionParams } from '../../../schemas/content-api.ts';
import { contentOf, contentPlugin } from '../content-plugin.ts';
import { defineRoute } from '../route.ts';

export const environmentBuildsPlugin = contentPlugin([
  {
    body: 'json',
    routes: [
      defineRoute(
        {
          method: 'POST',
          path: '/v1/environments/{id}/build',
          summary: "Start a build of the next version; answers at once (one build at a time: environment_busy)",
          params: idParams,
          status: 202,
          responses: { 202: { description: 'The build, building', schema: buildRecordSchema } },
        },
        async ({ deps, caller, params, request }) => contentOf(deps, request.method, request.url).startBuild(caller, params.id),
      ),
      defineRoute(
        {
          method: 'GET',
          path: '/v1/environments/{id}/builds/{version}',
          summary: "A build's record: status, the installers' log, packages, size",
          params: versionParams,
          responses: { 200: { description: 'The build', schema: buildRecordSchema } },
        },
        async ({ deps, caller, params, request }) => contentOf(deps, request.method, request.url).getBuild(caller, params.id, params.version),
      ),
      defineRoute(
        {
          method: 'GET',
          path: '/v1/environments/{id}/versions',
          summary: 'Every build, and which one is active',
          params: idParams,
          responses: { 200: { description: 'The versions', schema: versionListSchema } },
        },
        async ({ deps, caller, params, request }) => contentOf(deps, request.method, request.url).versions(caller, params.id),
      ),
      defineRoute(
        {
          method: 'POST',
          path: '/v1/environments/{id}/versions/{version}/activate',
          summary: 'Make a finished build the active version (unfinished: environment_not_ready)',
          params: versionParams,
          responses: { 200: { description: 'The versions', schema: versionListSchema } },
        },
        async ({ deps, caller, params, request }) => contentOf(deps, request.method, request.url).activate(caller, params.id, params.version),
      ),
    ],
  },
]);
