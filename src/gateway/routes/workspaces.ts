/**
 * Workspaces (issue 13): managed ones created in the caller's scope, directory ones from the admin's mappings; their
 * file history; and the admin's clear of a storage whose holder is proven stopped.
 */
import { z } from 'zod';
import { clearedSchema, createWorkspaceBody, historyEntrySchema, idParams, listQuery, workspaceSchema } from '../../../schemas/api.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const workspacesPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'POST',
      path: '/v1/workspaces',
      summary: 'Create a managed workspace (a directory Berth makes and owns)',
      body: createWorkspaceBody,
      status: 201,
      responses: { 201: { description: 'The workspace', schema: workspaceSchema } },
    },
    async ({ deps, caller, body }) => deps.api.createWorkspace(caller, body),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/workspaces',
      summary: "The caller's workspaces",
      query: listQuery,
      responses: { 200: pagedResponse('Workspaces', z.array(workspaceSchema)) },
    },
    async ({ deps, caller, query, reply }) => sendPage(reply, await deps.api.listWorkspaces(caller, query)),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/workspaces/{id}',
      summary: 'One workspace, with the turn holding it',
      params: idParams,
      responses: { 200: { description: 'The workspace', schema: workspaceSchema } },
    },
    async ({ deps, caller, params }) => deps.api.getWorkspace(caller, params.id),
  ),
  defineRoute(
    {
      method: 'DELETE',
      path: '/v1/workspaces/{id}',
      summary: 'Delete a managed workspace and its directory (workspace_busy while a turn holds it)',
      params: idParams,
      responses: { 204: { description: 'Deleted' } },
    },
    async ({ deps, caller, params }) => {
      await deps.api.deleteWorkspace(caller, params.id);
      return undefined;
    },
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/workspaces/{id}/history',
      summary: 'The file history: each tool mutation and each shell command\'s changes, with hashes, turn and execution',
      params: idParams,
      query: listQuery,
      responses: { 200: pagedResponse('History entries, oldest first', z.array(historyEntrySchema)) },
    },
    async ({ deps, caller, params, query, reply }) => sendPage(reply, await deps.api.workspaceHistory(caller, params.id, query)),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/workspaces/{id}/holder/clear',
      summary: 'Admin: clear the holder of the storage, only when its work is proven stopped',
      description: 'Every execution of the holding turn must be terminal (none unknown or running) and none of its calls running; otherwise invalid_state with detail.blocking.',
      params: idParams,
      responses: { 200: { description: 'The turn cleared (null: nobody held it)', schema: clearedSchema } },
    },
    async ({ deps, caller, params }) => deps.api.clearWorkspaceHolder(caller, params.id),
  ),
]);
