/**
 * Names wherever an environment id is: a route's environment reference — the `{id}` of every route under
 * /v1/environments/{id}, or the body or query field its spec names — is turned into the id before the route validates
 * it, by the runtime's one resolver (the caller's own scope only: another tenant's name is environment_not_found, the
 * answer a foreign id gets).
 */
import type { FastifyRequest } from 'fastify';
import type { RuntimeApi } from '../runtime/runtime-api.ts';

/** Where a route takes an environment: `params.id`, `body.<field>` or `query.<field>`. */
export type EnvironmentRef = `${'params' | 'body' | 'query'}.${string}`;

const ENVIRONMENT_ROUTE = '/v1/environments/{id}';

export const environmentRefOf = (spec: { path: string; environmentRef?: EnvironmentRef }): EnvironmentRef | undefined =>
  spec.environmentRef ?? (spec.path === ENVIRONMENT_ROUTE || spec.path.startsWith(`${ENVIRONMENT_ROUTE}/`) ? 'params.id' : undefined);

export async function resolveEnvironmentRef(api: RuntimeApi, request: FastifyRequest, where: EnvironmentRef): Promise<void> {
  const dot = where.indexOf('.');
  const holder = request[where.slice(0, dot) as 'params' | 'body' | 'query'] as Record<string, unknown> | undefined;
  const field = where.slice(dot + 1);
  // Only a JSON object's string field: a raw body (a stream) or a malformed value is left to the route's schema.
  if (!request.caller || !holder || typeof holder !== 'object' || Symbol.asyncIterator in holder) return;
  const ref = holder[field];
  if (typeof ref === 'string' && ref !== '') holder[field] = await api.resolveEnvironment(request.caller, ref);
}
