/**
 * Settings of the Environments content chapter (seed 001), from the environment: whether it is on at all
 * (BERTH_ENVIRONMENTS_CONTENT=0 switches it off: capabilities say environments false and every content endpoint
 * answers 404), the size limit of one file, whether git imports may name local paths, which internal hosts they may
 * reach, and the build step timeout.
 */
import { BerthError } from '../../../schemas/errors.ts';
import { defaultContentLimits } from '../../content/content-limits.ts';
import { gitHostAllowance } from '../../content/import/git-host-policy.ts';

export interface ContentSettings {
  enabled: boolean;
  /** BERTH_MAX_FILE_BYTES (default 100 MiB): one file written through the API; file_too_large past it. */
  maxFileBytes: number;
  /** BERTH_GIT_ALLOW_LOCAL=1: git imports may clone local paths and file:// URLs (single-tenant servers, tests). */
  gitAllowLocal: boolean;
  /**
   * BERTH_GIT_ALLOW_HOSTS (comma-separated host names, addresses or CIDR subnets; default none): hosts git imports may
   * reach although they resolve to loopback, private, link-local or this machine's own addresses.
   */
  gitAllowHosts: string[];
  /** BERTH_BUILD_STEP_TIMEOUT_MS (default 20 min): one installer step of a build. */
  buildStepTimeoutMs: number;
}

function positiveInt(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n <= 0) throw new BerthError('invalid_request', `invalid configuration: ${name} must be a positive integer`, { name });
  return n;
}

/** The entries of BERTH_GIT_ALLOW_HOSTS, checked now so that a typo stops the server rather than an import. */
function allowedHosts(raw: string | undefined): string[] {
  const entries = (raw ?? '').split(',').map((e) => e.trim()).filter((e) => e !== '');
  gitHostAllowance(entries);
  return entries;
}

export function contentSettings(env: NodeJS.ProcessEnv = process.env): ContentSettings {
  return {
    enabled: env.BERTH_ENVIRONMENTS_CONTENT !== '0',
    maxFileBytes: positiveInt(env, 'BERTH_MAX_FILE_BYTES', defaultContentLimits.maxFileBytes),
    gitAllowLocal: env.BERTH_GIT_ALLOW_LOCAL === '1',
    gitAllowHosts: allowedHosts(env.BERTH_GIT_ALLOW_HOSTS),
    buildStepTimeoutMs: positiveInt(env, 'BERTH_BUILD_STEP_TIMEOUT_MS', 20 * 60_000),
  };
}
