/**
 * The error codes each route can answer, for the OpenAPI document: what every route of its shape can meet (no
 * token or too many requests, malformed input, a missing resource, a body over the limit, too many streams, a fault) plus what its
 * resource's service refuses with, and the codes a route declares itself. Every code comes from the registry.
 */
import { errorCodes, type ErrorCode } from '../../schemas/errors.ts';
import type { RouteDef } from './route.ts';
import { refusedUnderReserve } from './storage-guard.ts';

/** The codes a resource's service answers with, by the first segment after /v1/. Conflicts are for writes only. */
const byResource: Record<string, { any?: ErrorCode[]; writes?: ErrorCode[] }> = {
  environments: {
    any: ['environment_not_found', 'output_expired'],
    writes: ['environment_invalid', 'environment_exists', 'environment_busy', 'environment_not_ready', 'invalid_state', 'stale_target', 'quota_exceeded', 'provider_missing', 'provider_unavailable', 'forbidden'],
  },
  allocations: { any: ['forbidden'] },
  executions: {
    // Output is read where it is kept: at the runtime owning the execution.
    any: ['output_expired', 'owned_elsewhere'],
    writes: ['operation_conflict', 'stale_target', 'invalid_state', 'quota_exceeded', 'environment_not_ready', 'environment_busy', 'workspace_busy', 'workspace_unavailable', 'provider_unavailable', 'provider_missing', 'forbidden'],
  },
  sessions: { writes: ['invalid_state', 'workspace_busy', 'workspace_unavailable', 'stale_version', 'file_too_large', 'quota_exceeded', 'forbidden'] },
  workspaces: { writes: ['invalid_state', 'workspace_busy', 'workspace_unavailable', 'stale_version', 'quota_exceeded', 'forbidden'] },
  leases: { writes: ['invalid_state', 'quota_exceeded', 'provider_unavailable', 'provider_missing', 'forbidden'] },
  harnesses: { writes: ['environment_invalid', 'environment_busy', 'environment_not_ready', 'invalid_state', 'forbidden'] },
  pools: { any: ['forbidden'], writes: ['invalid_state', 'quota_exceeded'] },
  projections: { any: ['forbidden'], writes: ['invalid_state'] },
  runtimes: { any: ['forbidden'] },
  retention: { any: ['forbidden', 'invalid_state'] },
  streams: { any: ['corrupt_event'] },
  events: { any: ['corrupt_event'] },
  metrics: { any: ['forbidden'] },
};

/** The resource a path belongs to: its first segment after /v1/ (`/v1/executions/{id}` -> executions), else its first. */
export function resourceOf(path: string): string {
  const [, first = '', second] = path.split('/');
  return first === 'v1' && second ? second : first;
}

const streaming = (route: RouteDef) =>
  route.spec.websocket === true || Object.values(route.spec.responses).some((r) => r.contentType === 'text/event-stream');

/** The registry codes `route` can answer, in registry order. */
export function routeErrors(route: RouteDef): ErrorCode[] {
  const { spec } = route;
  const codes = new Set<ErrorCode>(['internal', 'unavailable', 'projection_failed']);
  if (spec.auth !== false) codes.add('unauthorized').add('rate_limited');
  if (spec.params || spec.query || spec.body || spec.rawBody || spec.headers) codes.add('invalid_request');
  if (spec.params) codes.add('not_found');
  if (spec.body || spec.rawBody) codes.add('body_too_large');
  if (streaming(route)) codes.add('too_many_streams');
  const resource = byResource[resourceOf(spec.path)];
  for (const code of resource?.any ?? []) codes.add(code);
  if (spec.method !== 'GET' && resource?.writes) {
    // A write appends to an actor's stream: a concurrent writer can win the race past the runtime's retries, and
    // another runtime sharing the store may own the actor.
    for (const code of [...resource.writes, 'wrong_expected_version', 'owned_elsewhere'] as const) codes.add(code);
  }
  if (spec.auth !== false && refusedUnderReserve(spec.method, spec.path)) codes.add('storage_full');
  for (const code of spec.errors ?? []) codes.add(code);
  return (Object.keys(errorCodes) as ErrorCode[]).filter((code) => codes.has(code));
}
