/**
 * `GET /v1/pools` and `POST /v1/pools/{name}/drain`: the admin's warm pools (what each holds, its last refill error)
 * and the release of a pool's ready allocations. Pools are configured by the admin's environment only; members get
 * `forbidden`.
 */
import { z } from 'zod';
import { defineRoute, resourcePlugin } from '../route.ts';

const poolParams = z.strictObject({ name: z.string().regex(/^[a-z0-9-]{1,64}$/, 'expected a pool name') });

const poolSchema = z.object({
  name: z.string(),
  profile: z.record(z.string(), z.unknown()),
  size: z.number().int(),
  maxAgeSeconds: z.number().int().optional(),
  ready: z.number().int().describe('Ready to claim now (their supervisor answered)'),
  starting: z.number().int().describe('Being made or probed'),
  retiring: z.number().int().describe('Being released: aged, drained, found gone, or failed their probe'),
  consecutiveFailures: z.number().int(),
  lastError: z.string().nullable().describe('Why the last refill failed (e.g. the image is missing)'),
  lastErrorAt: z.number().int().nullable(),
  nextAttemptAt: z.number().int().nullable().describe('When refilling resumes after failures (ms since the epoch)'),
  attemptsLastMinute: z.number().int(),
  claims: z.object({ hit: z.number().int(), miss: z.number().int(), fallback: z.number().int() }),
});

export const poolsPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/v1/pools',
      summary: 'The warm pools and their state (admin only)',
      responses: { 200: { description: 'Every configured pool', schema: z.object({ pools: z.array(poolSchema) }) } },
    },
    async ({ deps, caller }) => ({ pools: deps.api.pools(caller) }),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/pools/{name}/drain',
      summary: "Release a pool's ready allocations; it refills (admin only)",
      params: poolParams,
      body: z.strictObject({}).optional(),
      responses: { 200: { description: 'How many were released', schema: z.object({ drained: z.number().int() }) } },
    },
    async ({ deps, caller, params }) => deps.api.drainPool(caller, params.name),
  ),
]);
