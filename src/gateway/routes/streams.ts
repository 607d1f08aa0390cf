/**
 * `GET /v1/streams/{stream}?at=N`: replay one stream — each event with the state before and after it, written as it
 * is folded, a page at a time.
 * `GET /v1/streams/{stream}/timeline?from=R&limit=N`: one page of it with the context diffs (the web console's timeline).
 */
import { z } from 'zod';
import { replayQuery, replayStepSchema, streamParams } from '../../../schemas/api.ts';
import { timelinePageSchema, timelineQuery, TIMELINE_LIMIT_DEFAULT, TIMELINE_LIMIT_MAX } from '../../../schemas/console.ts';
import { defineRoute, resourcePlugin } from '../route.ts';
import { jsonArrayStream } from '../json-array-stream.ts';
import { recordedEventToWire } from '../wire-json.ts';

export const streamsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/streams/{stream}',
      summary: 'Replay a stream up to revision `at` (default: all of it)',
      params: streamParams,
      query: replayQuery,
      responses: { 200: { description: 'Replay steps in revision order', schema: z.array(replayStepSchema) } },
    },
    async ({ deps, caller, params, query, reply }) => {
      const pages = await deps.api.replay(caller, params.stream, query.at);
      const body = jsonArrayStream(pages, (step) => ({ ...step, event: recordedEventToWire(step.event) }));
      // The client gone, the stream stops folding.
      reply.raw.once('close', () => body.destroy());
      return reply.type('application/json; charset=utf-8').send(body);
    },
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/streams/{stream}/timeline',
      summary: `One page of a stream's replay from revision \`from\` (\`limit\` 1 to ${TIMELINE_LIMIT_MAX}, default ${TIMELINE_LIMIT_DEFAULT}; \`failures=true\`: failing steps only)`,
      params: streamParams,
      query: timelineQuery,
      responses: { 200: { description: 'Replay steps with context diffs, the stream bounds and the next page', schema: timelinePageSchema } },
    },
    async ({ deps, caller, params, query }) => {
      const page = await deps.api.timeline(caller, params.stream, {
        from: query.from ?? 0,
        limit: query.limit ?? TIMELINE_LIMIT_DEFAULT,
        failures: query.failures === 'true',
      });
      return { ...page, steps: page.steps.map((step) => ({ ...step, event: recordedEventToWire(step.event) })) };
    },
  ),
]);
