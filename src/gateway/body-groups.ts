/**
 * Route groups that differ by how their bodies are parsed: `json` (fastify's own), `raw` (every body passed through
 * as a stream: a file's bytes, whatever its content type) and `archive` (everything but application/json passed
 * through; JSON parsed). Shared by the content chapter's routes and the turn file tools.
 */
import type { FastifyInstance } from 'fastify';
import type { GatewayDeps, RouteDef } from './route.ts';
import { resourcePlugin } from './route.ts';

export interface RouteGroup {
  routes: RouteDef[];
  body?: 'json' | 'raw' | 'archive';
}

export async function registerGroups(app: FastifyInstance, groups: RouteGroup[], opts: { deps: GatewayDeps }): Promise<void> {
  for (const group of groups) {
    await app.register(async (child) => {
      if (group.body === 'raw' || group.body === 'archive') {
        const json = child.getDefaultJsonParser('error', 'error');
        child.removeAllContentTypeParsers();
        if (group.body === 'archive') child.addContentTypeParser('application/json', { parseAs: 'string' }, json);
        child.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
      }
      await resourcePlugin(group.routes)(child, opts);
    });
  }
}
