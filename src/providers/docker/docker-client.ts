/**
 * Where the Docker engine is and how to talk to it: the endpoint comes from explicit config ({socketPath} or
 * {host, port, ca, cert, key}) or, as the docker CLI reads it, from DOCKER_HOST / DOCKER_TLS_VERIFY / DOCKER_CERT_PATH.
 * Also tells engine answers (definite) from transport failures (outcome unknown).
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';

export type DockerEndpoint =
  | { socketPath: string }
  | { host: string; port?: number; ca?: string | Buffer; cert?: string | Buffer; key?: string | Buffer };

type Env = Record<string, string | undefined>;

const DEFAULT_SOCKET = '/var/run/docker.sock';

/** The Unix socket DOCKER_HOST names (the default one when it is unset), or undefined for another scheme. */
function socketOf(dockerHost: string | undefined): string | undefined {
  if (!dockerHost) return DEFAULT_SOCKET;
  return dockerHost.startsWith('unix://') ? dockerHost.slice('unix://'.length) : undefined;
}

/** The endpoint the docker CLI would use with this environment. */
export function endpointFromEnv(env: Env = process.env): DockerEndpoint {
  const dockerHost = env.DOCKER_HOST?.trim() ?? '';
  const socketPath = socketOf(dockerHost);
  if (socketPath !== undefined) return { socketPath };
  if (dockerHost.startsWith('tcp://')) {
    const url = new URL(dockerHost.replace(/^tcp:/, 'http:'));
    const tls = Boolean(env.DOCKER_TLS_VERIFY);
    const endpoint: DockerEndpoint = { host: url.hostname, port: Number(url.port || (tls ? 2376 : 2375)) };
    if (!tls) return endpoint;
    const certDir = env.DOCKER_CERT_PATH || join(homedir(), '.docker');
    return {
      ...endpoint,
      ca: readFileSync(join(certDir, 'ca.pem')),
      cert: readFileSync(join(certDir, 'cert.pem')),
      key: readFileSync(join(certDir, 'key.pem')),
    };
  }
  throw new Error(`DOCKER_HOST=${dockerHost}: only unix:// and tcp:// endpoints are supported`);
}

/**
 * The host files that give the engine `env` names (as endpointFromEnv reads it) to whoever can open them: its Unix
 * socket, and the directory of its TLS client key. Contained commands must never see them (the engine is root on its
 * host); the well-known sockets are hidden anyway (bubblewrap.ts CONTROL_SOCKETS). Never throws, reads nothing.
 */
export function engineFiles(env: Env = process.env, endpoint?: DockerEndpoint): string[] {
  const socket = endpoint ? ('socketPath' in endpoint ? endpoint.socketPath : undefined) : socketOf(env.DOCKER_HOST?.trim());
  return [socket, env.DOCKER_CERT_PATH].filter((f): f is string => f !== undefined && f.startsWith('/'));
}

/**
 * A dockerode client. `timeoutMs` is the socket idle timeout of every request: right for control calls, wrong for
 * attached streams (an idle exec would be cut), so streaming callers make their own client without one.
 * No API version is pinned: unversioned paths get the engine's own current version, which accepts every field sent.
 */
export function createDockerClient(endpoint: DockerEndpoint, timeoutMs?: number): Docker {
  if ('socketPath' in endpoint) return new Docker({ socketPath: endpoint.socketPath, timeout: timeoutMs });
  const tls = endpoint.ca !== undefined || endpoint.cert !== undefined;
  return new Docker({
    host: endpoint.host,
    port: endpoint.port ?? (tls ? 2376 : 2375),
    protocol: tls ? 'https' : 'http',
    ca: endpoint.ca,
    cert: endpoint.cert,
    key: endpoint.key,
    timeout: timeoutMs,
  });
}

/** The engine answered with this HTTP status (a definite answer), or undefined when it did not answer at all. */
export function engineStatus(error: unknown): number | undefined {
  const status = (error as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' ? status : undefined;
}

/** A 4xx from the engine: it understood and refused; repeating the same call gives the same answer. */
export const isDefiniteRefusal = (error: unknown): boolean => {
  const status = engineStatus(error);
  return status !== undefined && status >= 400 && status < 500;
};

export const describeError = (error: unknown): string => {
  const e = error as { json?: { message?: string }; message?: string; code?: string } | null;
  return e?.json?.message ?? e?.message ?? e?.code ?? String(error);
};

/** Awaits a removal; a 404 (already gone) is as good as removed. */
export async function ignoreMissing(removal: Promise<unknown>): Promise<void> {
  try {
    await removal;
  } catch (error) {
    if (engineStatus(error) !== 404) throw error;
  }
}
