/**
 * Executions: submit (idempotent per operationId), get with `waitMs` long-poll, list, cancel, and output bytes by
 * cursor with `X-Berth-Cursor` / `X-Berth-Complete`. Streaming (SSE, WebSocket) is in execution-streams.ts.
 */
import { z } from 'zod';
import {
  executionRecordSchema,
  getExecutionQuery,
  idParams,
  listExecutionsQuery,
  outputQuery,
  submitExecutionBody,
} from '../../../schemas/api.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const executionsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'POST',
      path: '/v1/executions',
      summary: 'Submit a command; the same operationId returns the existing execution, never a second run',
      body: submitExecutionBody,
      environmentRef: 'body.environment',
      status: 201,
      responses: { 201: { description: 'The execution record', schema: executionRecordSchema } },
    },
    async ({ deps, caller, body }) => deps.api.submitExecution(caller, body),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/executions',
      summary: 'List execution records by operationId, environment or status',
      query: listExecutionsQuery,
      environmentRef: 'query.environment',
      responses: { 200: pagedResponse('Execution records', z.array(executionRecordSchema)) },
    },
    async ({ deps, caller, query, reply }) => sendPage(reply, await deps.api.listExecutions(caller, query)),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/executions/{id}',
      summary: 'One execution; `waitMs` long-polls until it is terminal or the time is up',
      params: idParams,
      query: getExecutionQuery,
      responses: { 200: { description: 'The execution record', schema: executionRecordSchema } },
    },
    async ({ deps, caller, params, query }) => {
      const waitMs = query.waitMs === undefined ? undefined : Math.min(query.waitMs, deps.limits.maxWaitMs);
      return deps.api.getExecution(caller, params.id, waitMs);
    },
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/executions/{id}/cancel',
      summary: 'Cancel (persisted before it is sent; the record turns cancelled once the executor confirms)',
      params: idParams,
      responses: { 200: { description: 'The execution record', schema: executionRecordSchema } },
    },
    async ({ deps, caller, params }) => deps.api.cancelExecution(caller, params.id),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/executions/{id}/output',
      summary: 'Output bytes of one stream from a cursor',
      params: idParams,
      query: outputQuery,
      responses: {
        200: {
          description: 'The bytes from `cursor` (possibly none)',
          schema: z.string(),
          contentType: 'application/octet-stream',
          headers: {
            'X-Berth-Cursor': { description: 'The cursor after these bytes', schema: z.string() },
            'X-Berth-Complete': {
              description: '`true` once the stream is closed and saved and these bytes reach its end',
              schema: z.enum(['true', 'false']),
            },
          },
        },
      },
    },
    async ({ deps, caller, params, query, reply }) => {
      const maxBytes = Math.min(query.maxBytes ?? deps.limits.outputReadBytes, deps.limits.outputReadBytes);
      const read = await deps.api.readOutput(caller, params.id, query.stream, query.cursor, maxBytes);
      // A full read of a complete stream may have more behind it: say complete only when the end is certain.
      const complete = read.complete && read.data.length < maxBytes;
      return reply
        .header('x-berth-cursor', String(read.next))
        .header('x-berth-complete', String(complete))
        .type('application/octet-stream')
        .send(read.data);
    },
  ),
]);
