/**
 * Leases (issue 15): bind work to a machine by the caller's key, acquire it lazily, pause, hold, resume and release
 * it, and follow its pauses as server-sent events. A lease's `env` is the caller's own: no answer carries it.
 */
import { z } from 'zod';
import {
  acquireLeaseBody,
  bindLeaseBody,
  leaseEventsQuery,
  leaseKeyParams,
  leaseSchema,
  leaseTargetSchema,
  leaseTimeoutBody,
  listLeasesQuery,
  pauseLeaseBody,
  positionEventIdSchema,
} from '../../../schemas/api.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import { parseOrReject } from '../../../schemas/parse-input.ts';
import { leasePauseFeed } from '../lease-pause-feed.ts';
import { pagedResponse, sendPage } from '../paged-reply.ts';
import { defineRoute, resourcePlugin } from '../route.ts';
import { serveSseFeed } from '../sse.ts';
import { stringifyWire } from '../wire-json.ts';

const leaseAnswer = { 200: { description: 'The lease', schema: leaseSchema } };

/** pause, hold, resume, release: the same shape, the lease's view after it. */
const stateRoute = (verb: 'hold' | 'resume' | 'release', summary: string) =>
  defineRoute(
    { method: 'POST', path: `/v1/leases/{key}/${verb}`, summary, params: leaseKeyParams, responses: leaseAnswer },
    async ({ deps, caller, params }) => deps.api.leases[verb](caller, params.key),
  );

export const leasesPlugin = resourcePlugin([
  defineRoute(
    {
      method: 'POST',
      path: '/v1/leases',
      summary: 'Bind work to a lease by key (allocates nothing); the same binding again answers 200',
      description: 'Exactly one of profile or environmentId. A key bound to other work is operation_conflict.',
      body: bindLeaseBody,
      environmentRef: 'body.environmentId',
      status: 201,
      responses: { 201: { description: 'The lease, bound now', schema: leaseSchema }, 200: { description: 'The lease, bound before the same way', schema: leaseSchema } },
    },
    async ({ deps, caller, body, reply }) => {
      const before = await deps.api.leases.get(caller, body.key).catch((e) => (isBerthError(e, 'not_found') ? undefined : Promise.reject(e)));
      const lease = await deps.api.leases.bind(caller, body);
      return reply.code(before ? 200 : 201).send(lease);
    },
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/leases',
      summary: "The caller's leases not released, optionally of one work",
      query: listLeasesQuery,
      responses: { 200: pagedResponse('Leases', z.array(leaseSchema)) },
    },
    async ({ deps, caller, query, reply }) => sendPage(reply, await deps.api.leases.list(caller, query)),
  ),
  defineRoute(
    { method: 'GET', path: '/v1/leases/{key}', summary: 'One lease', params: leaseKeyParams, responses: leaseAnswer },
    async ({ deps, caller, params }) => deps.api.leases.get(caller, params.key),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/leases/{key}/acquire',
      summary: "The lease's machine, made if there is none (a paused lease resumes first)",
      description:
        'A held lease is invalid_state (reason held). With suspend, a spawn refused by a quota or policy pauses the ' +
        'lease instead: invalid_state with reason paused, detail.cause and detail.lease.',
      params: leaseKeyParams,
      body: acquireLeaseBody,
      responses: { 200: { description: 'The lease and its target', schema: leaseTargetSchema } },
    },
    async ({ deps, caller, params, body }) => deps.api.leases.acquire(caller, params.key, body),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/leases/{key}/pause',
      summary: 'Pause the work with a cause; retryAt (ms since the epoch) sets the timer that resumes it',
      params: leaseKeyParams,
      body: pauseLeaseBody,
      responses: leaseAnswer,
    },
    async ({ deps, caller, params, body }) => deps.api.leases.pause(caller, params.key, body),
  ),
  defineRoute(
    {
      method: 'POST',
      path: '/v1/leases/{key}/timeout',
      summary: 'Release the lease timeoutMs from now unless moved again (null clears it); kept across restarts',
      description: 'The deadline is recorded in the lease stream; the maintenance loop releases the lease once it is due (within one maintenance period).',
      params: leaseKeyParams,
      body: leaseTimeoutBody,
      responses: leaseAnswer,
    },
    async ({ deps, caller, params, body }) => deps.api.leases.setTimeout(caller, params.key, body.timeoutMs),
  ),
  stateRoute('hold', 'A person holds the work: the timer stops until a resume'),
  stateRoute('resume', 'End the pause or hold; a reclaimed machine comes back at the next acquire'),
  stateRoute('release', 'Remove the machine (its workspace view saved first) and end the lease'),
  defineRoute(
    {
      method: 'GET',
      path: '/v1/leases/{key}/events',
      summary: "The lease's pauses as server-sent events, resumable by global position",
      description:
        'Each change of state: `id: <global position>`, `event: pause`, `data: {"key","state","cause","attempt",' +
        '"retryAt","at"}`. The response ends after `released`.',
      params: leaseKeyParams,
      query: leaseEventsQuery,
      queryToken: true,
      headers: { 'Last-Event-ID': { description: 'Resume after this global position', schema: z.string() } },
      responses: { 200: { description: 'An event stream', schema: z.string(), contentType: 'text/event-stream' } },
    },
    async ({ deps, caller, params, query, request, reply }) => {
      const lastEventId = request.headers['last-event-id'];
      const after = lastEventId !== undefined ? parseOrReject(positionEventIdSchema, lastEventId, 'header') : query.after;
      const feed = await leasePauseFeed(deps.api, caller, params.key, after === undefined ? undefined : BigInt(after));
      return serveSseFeed(deps, request, reply, feed, ({ position, frame }) => ({ id: String(position), event: 'pause', data: stringifyWire(frame) }));
    },
  ),
]);
