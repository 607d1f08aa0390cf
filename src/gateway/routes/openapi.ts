/** `GET /v1/openapi.json`: the OpenAPI 3.1 document generated from every route declaration (open, like /healthz). */
import { z } from 'zod';
import { buildOpenApi } from '../openapi.ts';
import { defineRoute, resourcePlugin, type ResourcePlugin, type RouteDef } from '../route.ts';

/** `allRoutes` is read on first request, so the document can list itself. */
export function openApiPlugin(allRoutes: () => RouteDef[], info: { title: string; version: string }): ResourcePlugin {
  let document: Record<string, unknown> | undefined;
  return resourcePlugin([
    defineRoute(
      {
        method: 'GET',
        path: '/v1/openapi.json',
        summary: 'This document',
        auth: false,
        responses: { 200: { description: 'OpenAPI 3.1', schema: z.record(z.string(), z.unknown()) } },
      },
      async () => (document ??= buildOpenApi(allRoutes(), info)),
    ),
  ]);
}
