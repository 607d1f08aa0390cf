/**
 * Route definitions: each route is declared once with its zod schemas (params, query, body, responses), registered
 * on fastify from that declaration, validated through `parseOrReject`, and listed in /v1/openapi.json from the same
 * declaration. One resource file exports one plugin built with `resourcePlugin`.
 */
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { WebSocketServer } from 'ws';
import type { z } from 'zod';
import { emptyQuery } from '../../schemas/api.ts';
import type { ErrorCode } from '../../schemas/errors.ts';
import type { Caller, RuntimeApi } from '../runtime/runtime-api.ts';
import type { RouteConfig } from './auth.ts';
import { environmentRefOf, resolveEnvironmentRef, type EnvironmentRef } from './environment-refs.ts';
import type { GatewayLimits } from './limits.ts';
import type { OpenStreams } from './open-streams.ts';
import type { StreamSlots } from './stream-slots.ts';
import { parseOrReject } from '../../schemas/parse-input.ts';

export interface GatewayDeps {
  api: RuntimeApi;
  limits: GatewayLimits;
  streams: OpenStreams;
  /** The per-token cap on open streams. */
  slots: StreamSlots;
  wss: WebSocketServer;
  /** Extra fields of `/healthz`. */
  health: () => Record<string, unknown>;
}

export interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  /** Default `application/json`. */
  contentType?: string;
  headers?: Record<string, { description: string; schema: z.ZodType }>;
}

/** Route options read by the gateway's hooks. */
export interface RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> extends RouteConfig {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** OpenAPI template, e.g. `/v1/executions/{id}`. */
  path: string;
  summary: string;
  description?: string;
  params?: P;
  query?: Q;
  body?: B;
  /**
   * A body that is not one JSON document (a file's bytes, an archive): its content types and what each carries
   * (documented only; the handler reads the stream, and a JSON `schema` is checked there).
   */
  rawBody?: Record<string, { description: string; schema?: z.ZodType }>;
  /**
   * A body or query field naming an environment (`body.environment`): an id, or a name of the caller's scope,
   * resolved before validation (environment-refs.ts). Routes under /v1/environments/{id} resolve their `{id}` anyway.
   */
  environmentRef?: EnvironmentRef;
  /** Error codes this route answers beyond those of its shape and resource (route-errors.ts). */
  errors?: ErrorCode[];
  /** Request headers the route reads (documented only; parsed by the handler). */
  headers?: Record<string, { description: string; schema: z.ZodType }>;
  /** WebSocket routes: the JSON messages each side sends (listed as `x-websocket-messages`). */
  messages?: { server: z.ZodType; client: z.ZodType };
  /** Status of a returned payload. Default 200; a handler returning undefined answers 204. */
  status?: number;
  responses: Record<number, ResponseSpec>;
}

type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteContext<P, Q, B> {
  params: Out<P>;
  query: Out<Q>;
  body: Out<B>;
  /** The authenticated caller (null on routes declared `auth: false`, which must not use it). */
  caller: Caller;
  request: FastifyRequest;
  reply: FastifyReply;
  deps: GatewayDeps;
}

export interface RouteDef {
  spec: RouteSpec<z.ZodType, z.ZodType, z.ZodType>;
  handler: (ctx: RouteContext<z.ZodType, z.ZodType, z.ZodType>) => Promise<unknown>;
}

export function defineRoute<P extends z.ZodType = never, Q extends z.ZodType = never, B extends z.ZodType = never>(
  spec: RouteSpec<P, Q, B>,
  handler: (ctx: RouteContext<P, Q, B>) => Promise<unknown>,
): RouteDef {
  return { spec, handler } as unknown as RouteDef;
}

const fastifyPath = (template: string): string => template.replace(/\{([^}]+)\}/g, ':$1');

export type ResourcePlugin = FastifyPluginAsync<{ deps: GatewayDeps }> & { routes: RouteDef[] };

export function resourcePlugin(routes: RouteDef[]): ResourcePlugin {
  const plugin: FastifyPluginAsync<{ deps: GatewayDeps }> = async (app, { deps }) => {
    for (const { spec, handler } of routes) {
      const config: RouteConfig = { auth: spec.auth, queryToken: spec.queryToken, websocket: spec.websocket };
      const environmentRef = environmentRefOf(spec);
      app.route({
        method: spec.method,
        url: fastifyPath(spec.path),
        config,
        handler: async (request, reply) => {
          if (environmentRef) await resolveEnvironmentRef(deps.api, request, environmentRef);
          const ctx: RouteContext<z.ZodType, z.ZodType, z.ZodType> = {
            params: spec.params ? parseOrReject(spec.params, request.params, 'params') : undefined,
            // A route without a query schema takes no query: unknown parameters are refused like unknown fields.
            query: parseOrReject(spec.query ?? emptyQuery, request.query, 'query'),
            body: spec.body ? parseOrReject(spec.body, request.body, 'body') : undefined,
            caller: request.caller!,
            request,
            reply,
            deps,
          };
          // Awaiting a handler that returned `reply` waits for that reply to be sent (Reply is thenable).
          const result = await handler(ctx);
          if (reply.sent) return reply;
          if (result === undefined) return reply.code(204).send();
          return reply.code(spec.status ?? 200).send(result);
        },
      });
    }
  };
  return Object.assign(plugin, { routes });
}
