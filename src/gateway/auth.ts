/**
 * Bearer-token authentication: the admin token from the configuration plus a tokens file (`[{token, scope, role}]`)
 * loaded at start. A token maps to the caller `{scope, role}` the runtime API is called with. Tokens are kept only as
 * SHA-256 digests, so lookups do not compare secrets byte by byte and a heap dump does not hold them.
 */
import { hash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { BerthError } from '../../schemas/errors.ts';
import type { Caller } from '../runtime/runtime-api.ts';
import { rawQueryParameter } from './raw-query.ts';

/** How a route authenticates (fastify route config, read by the auth hook). */
export interface RouteConfig {
  /** Default true: a bearer token is required. */
  auth?: boolean;
  /** Accept `?token=` when there is no Authorization header (EventSource and browser WebSocket cannot set one). */
  queryToken?: boolean;
  /** The route answers WebSocket upgrades. */
  websocket?: boolean;
}

export const tokenEntrySchema = z.strictObject({
  token: z.string().min(16).max(512),
  scope: z.string().min(1).max(200),
  role: z.enum(['admin', 'member']),
});
export type TokenEntry = z.infer<typeof tokenEntrySchema>;

export interface Authenticator {
  /** The caller a token stands for, or undefined for no or an unknown token. */
  authenticate(token: string | undefined): Caller | undefined;
}

export interface TokenAuthOptions {
  adminToken?: string;
  /** Scope of the admin token. Default `default`. */
  adminScope?: string;
  tokens?: TokenEntry[];
}

/** How a token is kept and keyed (never the token itself). */
export const tokenDigest = (token: string): string => hash('sha256', token, 'hex');

export function createTokenAuth(options: TokenAuthOptions): Authenticator {
  const callers = new Map<string, Caller>();
  // A string of no configured token's length is no token: the log redaction asks about every long word of a URL.
  const lengths = new Set<number>();
  const add = (token: string, caller: Caller) => {
    lengths.add(token.length);
    const key = tokenDigest(token);
    const existing = callers.get(key);
    if (existing && (existing.scope !== caller.scope || existing.role !== caller.role)) {
      throw new BerthError('invalid_request', 'One token is configured twice with different scopes or roles.');
    }
    callers.set(key, caller);
  };
  if (options.adminToken) add(options.adminToken, { scope: options.adminScope ?? 'default', role: 'admin' });
  for (const entry of options.tokens ?? []) add(entry.token, { scope: entry.scope, role: entry.role });
  return {
    authenticate: (token) => (token && lengths.has(token.length) ? callers.get(tokenDigest(token)) : undefined),
  };
}

/** Reads and validates a tokens file. Its content is never quoted in errors: it is made of secrets. */
export async function loadTokensFile(path: string): Promise<TokenEntry[]> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw new BerthError('invalid_request', `The tokens file ${path} cannot be read as JSON.`, { path }, { cause: error });
  }
  const result = z.array(tokenEntrySchema).safeParse(parsed);
  if (!result.success) {
    const issues = result.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
    throw new BerthError('invalid_request', `The tokens file ${path} is not [{token, scope, role}].`, { path, issues });
  }
  return result.data;
}

/** The token of an `Authorization: Bearer <token>` header. */
export function bearerToken(header: string | undefined): string | undefined {
  const match = header ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
  return match?.[1];
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every route that requires a token. */
    caller: Caller | null;
  }
}

/**
 * The token a request presents: its bearer header, else, on routes that allow it (streaming ones), the query
 * parameter named literally `token` in the raw URL (never a decoded name such as `tok%65n`).
 */
export function presentedToken(request: FastifyRequest): string | undefined {
  const config = request.routeOptions.config as RouteConfig;
  const fromQuery = config.queryToken ? rawQueryParameter(request.raw.url ?? '', 'token') : undefined;
  return bearerToken(request.headers.authorization) ?? fromQuery;
}

/** Requires a known bearer token on every route not marked `auth: false`; `?token=` where the route allows it. */
export function installAuth(app: FastifyInstance, authenticator: Authenticator): void {
  app.decorateRequest('caller', null);
  app.addHook('onRequest', async (request) => {
    const config = request.routeOptions.config as RouteConfig;
    if (config.auth === false) return;
    const token = presentedToken(request);
    const caller = authenticator.authenticate(token);
    if (!caller) {
      throw new BerthError('unauthorized', token ? 'The bearer token is not known.' : 'A bearer token is required.');
    }
    request.caller = caller;
  });
}
