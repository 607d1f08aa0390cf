/** `GET /healthz` (open: says that the process serves, with the runtime's identity) and `GET /metrics` (Prometheus text; needs the admin token). */
import { z } from 'zod';
import { healthSchema } from '../../../schemas/api.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

export const healthPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'GET',
      path: '/healthz',
      summary: 'Liveness',
      auth: false,
      responses: { 200: { description: 'Serving', schema: healthSchema } },
    },
    async ({ deps }) => {
      const health = deps.health();
      const failed = (health.failedProjections as string[] | undefined) ?? [];
      return { ...health, status: failed.length > 0 ? 'degraded' : 'ok' };
    },
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/metrics',
      summary: 'Prometheus metrics',
      responses: { 200: { description: 'Prometheus text exposition', schema: z.string(), contentType: 'text/plain' } },
    },
    async ({ deps, caller, reply }) => reply.type('text/plain; version=0.0.4; charset=utf-8').send(await deps.api.metrics(caller)),
  ),
]);
