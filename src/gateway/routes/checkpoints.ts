/**
 * Workspace checkpoints and views (issue 14): the published checkpoints of a workspace, one's tree, the diff between
 * two, the workspace's view and its detachment; an explicit checkpoint and a restore inside a tool turn (which holds
 * the storage). Checkpoint ids are `sha256:<64 hex>`: another shape is invalid_request before anything is read.
 */
import { z } from 'zod';
import {
  checkpointDiffSchema,
  checkpointListQuery,
  checkpointParams,
  checkpointSchema,
  checkpointTreeSchema,
  diffQuery,
  idParams,
  mountSchema,
  restoreBody,
  restoredSchema,
  sessionTurnParams,
} from '../../../schemas/api.ts';
import { MAX_LISTED_ENTRIES } from '../../runtime/workspaces/checkpoint-service.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

const TRUNCATED = `At most ${MAX_LISTED_ENTRIES} entries; past it the answer says truncated: true.`;

export const checkpointsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/workspaces/{id}/checkpoints',
      summary: "The workspace's published checkpoints, oldest first, each with the head revision it made",
      description: 'A page reads `limit` events of the workspace stream and answers its checkpoints: a page may hold fewer than limit (even none) and still name a next cursor.',
      params: idParams,
      query: checkpointListQuery,
      responses: { 200: pagedResponse('Checkpoints, oldest first', z.array(checkpointSchema)) },
    },
    async ({ deps, caller, params, query, reply }) => sendPage(reply, await deps.api.checkpoints.list(caller, params.id, query)),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/workspaces/{id}/checkpoints/{checkpointId}',
      summary: 'One checkpoint of the workspace with its tree (paths, types, modes, sizes, hashes)',
      description: `not_found for an id this workspace never published. ${TRUNCATED}`,
      params: checkpointParams,
      responses: { 200: { description: 'The checkpoint and its entries', schema: checkpointTreeSchema } },
    },
    async ({ deps, caller, params }) => deps.api.checkpoints.get(caller, params.id, params.checkpointId),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/workspaces/{id}/diff',
      summary: 'What changed from one checkpoint of the workspace to another, path by path',
      description: `Both must be checkpoints this workspace published (else not_found). ${TRUNCATED}`,
      params: idParams,
      query: diffQuery,
      responses: { 200: { description: 'The changes (before and after of each path; null where absent)', schema: checkpointDiffSchema } },
    },
    async ({ deps, caller, params, query }) => deps.api.checkpoints.diff(caller, params.id, query.from, query.to),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/workspaces/{id}/mount',
      summary: "The workspace's view: its state, target allocation, mount generation, revision and pins",
      params: idParams,
      responses: { 200: { description: 'The view (state unbound when it never had one)', schema: mountSchema } },
    },
    async ({ deps, caller, params }) => deps.api.checkpoints.mount(caller, params.id),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/workspaces/{id}/detach',
      summary: 'Save the view (a checkpoint) and let it go; its allocation stays',
      description: 'A view that is not active or unavailable answers as it is. Refused while executions write it.',
      params: idParams,
      responses: { 200: { description: 'The view after detachment', schema: mountSchema } },
    },
    async ({ deps, caller, params }) => deps.api.checkpoints.detach(caller, params.id),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/sessions/{id}/turns/{turnId}/checkpoints',
      summary: "Publish a checkpoint of the turn's workspace (of its active view, else of its directory)",
      description: 'stale_version (412) when the head moved while it was taken: nothing is published.',
      params: sessionTurnParams,
      status: 201,
      responses: { 201: { description: 'The published checkpoint', schema: checkpointSchema } },
    },
    async ({ deps, caller, params }) => deps.api.checkpoints.create(caller, params.id, params.turnId),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/sessions/{id}/turns/{turnId}/restore',
      summary: "Give the turn's workspace the tree of one of its checkpoints (recorded in the history as `restore`)",
      description: 'expectedRevision other than the head: stale_version (412), nothing restored. A checkpoint this workspace never published: not_found.',
      params: sessionTurnParams,
      body: restoreBody,
      responses: { 200: { description: 'The checkpoint restored and what changed', schema: restoredSchema } },
    },
    async ({ deps, caller, params, body }) => deps.api.checkpoints.restore(caller, params.id, params.turnId, body.checkpoint, body.expectedRevision),
  ),
]);
