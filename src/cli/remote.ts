/**
 * How the CLI's remote commands reach a running `berth serve`: `--url` / BERTH_URL (default
 * http://BERTH_HOST:BERTH_PORT, i.e. http://127.0.0.1:7420), `--token` / BERTH_TOKEN (default: the admin token kept
 * in the data directory, for the operator on the same machine). A server that does not answer becomes one clear
 * sentence instead of a stack trace.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { PAGE_LIMIT_MAX } from '../../schemas/api.ts';
import { BerthError } from '../../schemas/errors.ts';
import { Berth } from '../client/berth-client.ts';
import { findEnvironmentId } from './environment-ref.ts';

export const remoteOptions = {
  url: { type: 'string' },
  token: { type: 'string' },
} as const;

export const remoteUsage = `  --url URL (BERTH_URL, default http://127.0.0.1:7420) names the server; --token TOKEN (BERTH_TOKEN, default the
  admin token in BERTH_DATA_DIR/token) authenticates.`;

/** True when the command line or the environment names a server: commands with an in-process mode go remote. */
export const namesServer = (argv: string[], env: NodeJS.ProcessEnv = process.env): boolean =>
  argv.some((a) => a === '--url' || a.startsWith('--url=')) || Boolean(env.BERTH_URL);

export function serverUrl(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag) return flag;
  if (env.BERTH_URL) return env.BERTH_URL;
  const host = env.BERTH_HOST || '127.0.0.1';
  return `http://${host.includes(':') ? `[${host}]` : host}:${env.BERTH_PORT || 7420}`;
}

export function serverToken(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  const token = flag ?? (env.BERTH_TOKEN || undefined);
  if (token) return token;
  const file = join(resolve(env.BERTH_DATA_DIR || './.berth'), 'token');
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

/** Connects (checking the token) or explains why not. */
export async function connectRemote(values: { url?: string; token?: string }): Promise<Berth> {
  const url = serverUrl(values.url);
  if (!/^https?:\/\//.test(url)) throw new BerthError('invalid_request', `--url takes an http:// or https:// URL, not "${url}".`);
  const token = serverToken(values.token);
  try {
    return await Berth.connect({ url, token, backoff: { giveUpAfterMs: 30_000 } });
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(url, error);
    throw error;
  }
}

/** Connects, runs `call` with the client, and turns a server that stops answering into one clear sentence. */
export async function withServer<T>(values: { url?: string; token?: string }, call: (berth: Berth) => Promise<T>): Promise<T> {
  const berth = await connectRemote(values);
  try {
    return await call(berth);
  } catch (error) {
    throw isUnreachable(error) ? unreachable(serverUrl(values.url), error) : error;
  }
}

/** The environment `ref` names on the server (environment-ref.ts). */
export const findEnvironment = (berth: Berth, ref: string): Promise<string> => findEnvironmentId(ref, berth.environments.iterate({ limit: PAGE_LIMIT_MAX }));
