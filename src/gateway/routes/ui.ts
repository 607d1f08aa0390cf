/**
 * `GET /ui` and `GET /ui/{asset}`: the web console, a fixed set of files (its own under src/gateway/ui and the
 * vendored ES modules of preact, htm and xterm from node_modules) read once at start and served by name, so no
 * request path ever reaches the filesystem. Open routes: the page signs in with a token the user types.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply } from 'fastify';
import { z } from 'zod';
import { BerthError } from '../../../schemas/errors.ts';
import { defineRoute, resourcePlugin } from '../route.ts';

const require = createRequire(import.meta.url);
const uiDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'ui');
const besideEntry = (pkg: string, ...path: string[]) => join(dirname(require.resolve(pkg)), ...path);

/** Vendor modules by the name the import map gives them. */
const vendor: Record<string, string> = {
  'preact.js': besideEntry('preact', 'preact.module.js'),
  'preact-hooks.js': besideEntry('preact/hooks', 'hooks.module.js'),
  'htm.js': besideEntry('htm', 'htm.module.js'),
  'xterm.js': besideEntry('@xterm/xterm', 'xterm.mjs'),
  'xterm.css': besideEntry('@xterm/xterm', '..', 'css', 'xterm.css'),
};

const contentTypes: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

interface Asset {
  body: Buffer;
  type: string;
}

function loadAssets(): Map<string, Asset> {
  const files: Record<string, string> = { ...vendor };
  for (const name of readdirSync(uiDir)) if (contentTypes[extname(name)]) files[name] = join(uiDir, name);
  return new Map(Object.entries(files).map(([name, path]) => [name, { body: readFileSync(path), type: contentTypes[extname(path)] ?? contentTypes[extname(name)] }]));
}

/** The page's inline import map is the only inline script the policy allows (by its hash). */
function contentSecurityPolicy(index: Buffer): string {
  const importMap = /<script type="importmap">([\s\S]*?)<\/script>/.exec(index.toString('utf8'))?.[1] ?? '';
  const hash = createHash('sha256').update(importMap).digest('base64');
  return [
    "default-src 'self'",
    `script-src 'self' 'sha256-${hash}'`,
    "style-src 'self' 'unsafe-inline'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

const assetParams = z.strictObject({ asset: z.string().regex(/^[a-z0-9][a-z0-9.-]{0,63}$/, 'expected an asset name') });

let assets: Map<string, Asset> | undefined;
let policy = '';
const assetNamed = (name: string): Asset => {
  if (!assets) {
    assets = loadAssets();
    policy = contentSecurityPolicy(assets.get('index.html')!.body);
  }
  const asset = assets.get(name);
  if (!asset) throw new BerthError('not_found', 'No such console asset.', { asset: name });
  return asset;
};

const html = { description: 'The console page', schema: z.string(), contentType: 'text/html' };

export const uiPlugin = resourcePlugin([
  defineRoute({ method: 'GET', path: '/ui', summary: 'The web console', auth: false, responses: { 200: html } }, async ({ reply }) =>
    send(reply, assetNamed('index.html')),
  ),
  defineRoute(
    {
      method: 'GET',
      path: '/ui/{asset}',
      summary: "One of the web console's files (a fixed set)",
      auth: false,
      params: assetParams,
      responses: { 200: { description: 'The file', schema: z.string(), contentType: 'text/javascript' } },
    },
    async ({ reply, params }) => send(reply, assetNamed(params.asset)),
  ),
]);

function send(reply: FastifyReply, asset: Asset) {
  return reply
    .header('content-type', asset.type)
    .header('cache-control', 'no-cache')
    .header('x-content-type-options', 'nosniff')
    .header('content-security-policy', policy)
    .header('referrer-policy', 'no-referrer')
    .send(asset.body);
}
