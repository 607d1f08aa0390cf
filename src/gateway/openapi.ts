/**
 * Generates the OpenAPI 3.1 document from the route declarations and their zod schemas (`z.toJSONSchema`, JSON
 * Schema 2020-12, which OpenAPI 3.1 embeds as is). Nothing is written by hand, so the document cannot drift from
 * what the gateway validates.
 */
import { z } from 'zod';
import { errorBodySchema } from '../../schemas/api.ts';
import type { RouteDef } from './route.ts';

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

/** `GET /v1/executions/{id}/cancel` -> `getV1ExecutionsIdCancel`. */
const operationId = (method: string, path: string): string =>
  [method.toLowerCase(), ...path.split(/[^A-Za-z0-9]+/).filter(Boolean)]
    .map((word, i) => (i === 0 ? word : word.charAt(0).toUpperCase() + word.slice(1)))
    .join('');

export function buildOpenApi(routes: RouteDef[], info: { title: string; version: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const { spec } of routes) {
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
    responses.default = {
      description: 'Error: {"error":{"code","message","detail"}}',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
    paths[spec.path] ??= {};
    paths[spec.path]![spec.method.toLowerCase()] = {
      operationId: operationId(spec.method, spec.path),
      summary: spec.summary,
      ...(spec.description && { description: spec.description }),
      ...(parameters.length > 0 && { parameters }),
      ...(spec.body && {
        requestBody: { required: true, content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } } },
      }),
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
    paths,
    components: {
      schemas: { Error: jsonSchema(errorBodySchema, 'output') },
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    },
    security: [{ bearer: [] }],
  };
}
