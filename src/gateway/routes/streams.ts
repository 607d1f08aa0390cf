/** `GET /v1/streams/{stream}?at=N`: replay one stream — each event with the state before and after it. */
import { z } from 'zod';
import { replayQuery, replayStepSchema, streamParams } from '../../../schemas/api.ts';
import { defineRoute, resourcePlugin } from '../route.ts';
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
    async ({ deps, caller, params, query }) => {
      const steps = await deps.api.replay(caller, params.stream, query.at);
      return steps.map((step) => ({ ...step, event: recordedEventToWire(step.event) }));
    },
  ),
]);
