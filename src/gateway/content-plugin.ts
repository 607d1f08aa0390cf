/**
 * How the Environments content chapter's route plugins differ from the others: every route answers 404 (as an
 * unknown route does) when the runtime has no content chapter (switched off: `api.content` absent); a `{path}` at the
 * end of a route template matches the rest of the URL (file paths have slashes; each segment is percent-decoded);
 * and bodies may be raw bytes (body-groups.ts).
 */
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { BerthError } from '../../schemas/errors.ts';
import type { ContentApi } from '../runtime/builds/content-api.ts';
import { registerGroups, type RouteGroup } from './body-groups.ts';
import type { GatewayDeps, ResourcePlugin } from './route.ts';


/** The content API, or the 404 an unknown route gets. */
export function contentOf(deps: GatewayDeps, method: string, url: string): ContentApi {
  if (deps.api.content) return deps.api.content;
  const path = url.split('?')[0]!.slice(0, 200);
  throw new BerthError('not_found', `No route ${method} ${path}.`, { method, path });
}

export function contentPlugin(groups: RouteGroup[]): ResourcePlugin {
  const plugin: FastifyPluginAsync<{ deps: GatewayDeps }> = async (app, opts) => {
    app.addHook('onRequest', async (request) => void contentOf(opts.deps, request.method, request.url));
    // A trailing {path} takes the rest of the URL; the handlers read it under its declared name.
    app.addHook('onRoute', (route) => {
      route.url = route.url.replace(/\/:path$/, '/*');
    });
    app.addHook('preValidation', async (request) => {
      const params = request.params as Record<string, string>;
      if (params && '*' in params) {
        params.path = params['*']!;
        delete params['*'];
      }
    });
    await registerGroups(app, groups, opts);
  };
  return Object.assign(plugin, { routes: groups.flatMap((g) => g.routes) });
}

/**
 * A raw request body as bytes for the content layer. Stopping early (a refused archive, an oversized file) must not
 * destroy the request: that would close the socket before the error answer is written. The gateway reads and drops
 * the rest before it answers (unread-body.ts).
 */
export function requestBytes(request: FastifyRequest): AsyncIterable<Uint8Array> {
  const body = request.body as AsyncIterable<Uint8Array> | undefined;
  if (!body) return (async function* () {})();
  return {
    [Symbol.asyncIterator]: () => {
      const it = body[Symbol.asyncIterator]();
      return { next: () => it.next(), return: async () => ({ done: true as const, value: undefined }) };
    },
  };
}
