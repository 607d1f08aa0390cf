/**
 * Generates the OpenAPI 3.1 document from the route declarations and their zod schemas (`z.toJSONSchema`, JSON
 * Schema 2020-12, which OpenAPI 3.1 embeds as is): each operation tagged with its resource, its request body (JSON,
 * or the raw bytes and archives a route reads itself), and its error answers by status, each listing the registry
 * codes the route can answer (route-errors.ts). Nothing is written by hand, so the document cannot drift from what
 * the gateway validates.
 */
import { z } from 'zod';
import { errorBodySchema } from '../../schemas/api.ts';
import { errorCodes, type ErrorCode } from '../../schemas/errors.ts';
import type { RouteDef } from './route.ts';
import { environmentRefOf } from './environment-refs.ts';
import { resourceOf, routeErrors } from './route-errors.ts';

type JsonSchema = Record<string, unknown>;

/** Request schemas describe what a client sends (before transforms and defaults); responses what it receives. */
function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): JsonSchema {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}

interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  required: boolean;
  description?: string;
  schema: JsonSchema;
}

function objectParameters(schema: z.ZodType | undefined, where: 'path' | 'query'): Parameter[] {
  if (!schema) return [];
  const json = jsonSchema(schema, 'input');
  const properties = (json.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json.required ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    schema: property,
  }));
}

const ENVIRONMENT_REF = "The environment's id, or its name or slug in the caller's scope (environment_not_found otherwise).";

/**
 * A route's environment reference (environment-refs.ts) takes a name as well as an id: its path or query parameter is
 * documented as any string with that sentence; a body field gets the sentence in the operation's description.
 */
function environmentRefDoc(spec: RouteDef['spec'], parameters: Parameter[]): string | undefined {
  const where = environmentRefOf(spec);
  if (!where) return undefined;
  const [part, field] = [where.slice(0, where.indexOf('.')), where.slice(where.indexOf('.') + 1)];
  const parameter = parameters.find((p) => p.name === field && p.in === (part === 'params' ? 'path' : part));
  if (parameter) Object.assign(parameter, { description: ENVIRONMENT_REF, schema: { type: 'string', minLength: 1 } });
  return part === 'body' ? `\`${field}\`: ${ENVIRONMENT_REF}` : undefined;
}

/** `GET /v1/executions/{id}/cancel` -> `getV1ExecutionsIdCancel`. */
const operationId = (method: string, path: string): string =>
  [method.toLowerCase(), ...path.split(/[^A-Za-z0-9]+/).filter(Boolean)]
    .map((word, i) => (i === 0 ? word : word.charAt(0).toUpperCase() + word.slice(1)))
    .join('');

/** A body a route reads as bytes: binary, or JSON checked by the handler. */
const rawContent = (raw: NonNullable<RouteDef['spec']['rawBody']>) =>
  Object.fromEntries(
    Object.entries(raw).map(([type, { description, schema }]) => [
      type,
      { schema: schema ? { ...jsonSchema(schema, 'input'), description } : { type: 'string', contentMediaType: type, description } },
    ]),
  );

/** One response per error status, its body's code limited to the codes of that status the route can answer. */
function errorResponses(route: RouteDef): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of routeErrors(route)) {
    const status = errorCodes[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => [
      String(status),
      {
        description: `Error ${codes.join(', ')}: {"error":{"code","message","detail"}}`,
        content: {
          'application/json': {
            schema: { allOf: [{ $ref: '#/components/schemas/Error' }, { properties: { error: { properties: { code: { enum: codes } } } } }] },
          },
        },
      },
    ]),
  );
}

export function buildOpenApi(routes: RouteDef[], info: { title: string; version: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  for (const route of routes) {
    const { spec } = route;
    const parameters: Parameter[] = [
      ...objectParameters(spec.params, 'path'),
      ...objectParameters(spec.query, 'query'),
      ...Object.entries(spec.headers ?? {}).map(([name, header]) => ({
        name,
        in: 'header' as const,
        required: false,
        description: header.description,
        schema: jsonSchema(header.schema, 'input'),
      })),
    ];
    const environmentRef = environmentRefDoc(spec, parameters);
    const responses: Record<string, unknown> = {};
    for (const [status, response] of Object.entries(spec.responses)) {
      responses[status] = {
        description: response.description,
        ...(response.headers && {
          headers: Object.fromEntries(
            Object.entries(response.headers).map(([name, h]) => [name, { description: h.description, schema: jsonSchema(h.schema, 'output') }]),
          ),
        }),
        ...(response.schema && {
          content: { [response.contentType ?? 'application/json']: { schema: jsonSchema(response.schema, 'output') } },
        }),
      };
    }
    Object.assign(responses, errorResponses(route));
    const tag = resourceOf(spec.path);
    tags.add(tag);
    paths[spec.path] ??= {};
    paths[spec.path]![spec.method.toLowerCase()] = {
      operationId: operationId(spec.method, spec.path),
      tags: [tag],
      summary: spec.summary,
      ...((spec.description || environmentRef) && { description: [spec.description, environmentRef].filter(Boolean).join(' ') }),
      ...(parameters.length > 0 && { parameters }),
      ...(spec.body && {
        requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } } },
      }),
      ...(spec.rawBody && { requestBody: { required: true, content: rawContent(spec.rawBody) } }),
      responses,
      ...(spec.messages && {
        'x-websocket-messages': {
          server: jsonSchema(spec.messages.server, 'output'),
          client: jsonSchema(spec.messages.client, 'input'),
        },
      }),
      ...(spec.auth === false && { security: [] }),
    };
  }
  return {
    openapi: '3.1.0',
    info,
    tags: [...tags].sort().map((name) => ({ name })),
    paths,
    components: {
      schemas: { Error: jsonSchema(errorBodySchema, 'output') },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
    security: [{ bearer: [] }],
  };
}
