/**
 * Which Berth a CLI command talks to, decided once for every command: the server named by `--url` / BERTH_URL, else
 * the server holding the data directory (it records its URL in `<data-dir>/serving.json` when it listens), else —
 * for the commands that can — a runtime in this process on the data directory. The token: `--token` / BERTH_TOKEN,
 * else the admin token kept in the data directory. A server that does not answer becomes one clear sentence.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import { Berth } from '../client/berth-client.ts';
import { resolveSettings } from '../runtime/config.ts';
import { findServing } from '../runtime/core/serving-record.ts';

export const remoteOptions = {
  url: { type: 'string' },
  token: { type: 'string' },
  /** Where to look for the serving record (and the token); a runtime in this process uses it too. */
  'data-dir': { type: 'string' },
} as const;


export interface ServerTarget {
  url: string;
  /** The admin token's file the serving record names, when the server came from it. */
  tokenFile?: string;
}

export interface TargetFlags {
  url?: string;
  'data-dir'?: string;
}

/** The server named by --url / BERTH_URL or holding the data directory; undefined when there is none. */
export async function findServer(values: TargetFlags, env: NodeJS.ProcessEnv = process.env): Promise<ServerTarget | undefined> {
  const named = values.url ?? (env.BERTH_URL || undefined);
  if (named) return { url: named };
  const serving = await findServing(dataDirOf(values, env));
  return serving && { url: serving.url, ...(serving.tokenFile ? { tokenFile: serving.tokenFile } : {}) };
}

/** For the commands that need a server: the one found, else the default address (http://BERTH_HOST:BERTH_PORT). */
async function serverOrDefault(values: TargetFlags, env: NodeJS.ProcessEnv = process.env): Promise<ServerTarget> {
  const found = await findServer(values, env);
  if (found) return found;
  const host = env.BERTH_HOST || '127.0.0.1';
  return { url: `http://${host.includes(':') ? `[${host}]` : host}:${env.BERTH_PORT || 7420}` };
}

const dataDirOf = (values: TargetFlags, env: NodeJS.ProcessEnv) => resolveSettings({ dataDir: values['data-dir'] }, env).dataDir;

function serverToken(flag: string | undefined, target: ServerTarget, values: TargetFlags, env: NodeJS.ProcessEnv = process.env): string {
  const token = flag ?? (env.BERTH_TOKEN || undefined);
  if (token) return token;
  const file = target.tokenFile ?? join(dataDirOf(values, env), 'token');
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    throw new BerthError('unauthorized', `No token: pass --token, set BERTH_TOKEN, or run where ${file} is readable.`);
  }
}

/** A failed fetch (refused, reset, unknown host) rather than an answer from the server. */
export const isUnreachable = (error: unknown): boolean => error instanceof TypeError && /fetch failed/i.test(error.message);

export function unreachable(url: string, error: unknown): BerthError {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? (error as Error).message;
  return new BerthError('unavailable', `No Berth server answers at ${url} (${why}): start one with \`berth serve\`, or point --url / BERTH_URL at it.`, {
    url,
  });
}

/** Connects to `target` (checking the token) or explains why not. */
async function connect(target: ServerTarget, values: TargetFlags & { token?: string }): Promise<Berth> {
  const { url } = target;
  if (!/^https?:\/\//.test(url)) throw new BerthError('invalid_request', `--url takes an http:// or https:// URL, not "${url}".`);
  const token = serverToken(values.token, target, values);
  try {
    return await Berth.connect({ url, token, backoff: { giveUpAfterMs: 30_000 } });
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(url, error);
    throw error;
  }
}

/**
 * Connects to the server (`target`, else the one found, else the default address), runs `call` with the client, and
 * turns a server that stops answering into one clear sentence.
 */
export async function withServer<T>(
  values: TargetFlags & { token?: string },
  call: (berth: Berth, url: string) => Promise<T>,
  target?: ServerTarget,
): Promise<T> {
  const server = target ?? (await serverOrDefault(values));
  const berth = await connect(server, values);
  try {
    return await call(berth, server.url);
  } catch (error) {
    throw isUnreachable(error) ? unreachable(server.url, error) : error;
  }
}
