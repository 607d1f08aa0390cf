/**
 * The admin's warm pools: `BERTH_POOLS` (a JSON array) or `BERTH_POOLS_FILE` (a file holding one), each pool a name,
 * a profile, a size and an optional maximum age; their sizes together bounded by `BERTH_POOLS_MAX_CONTAINERS`.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { BerthError } from '../../../schemas/errors.ts';
import { profileSchema, type Profile } from '../../../schemas/profile.ts';

/** How many pooled containers all pools together may keep when BERTH_POOLS_MAX_CONTAINERS is unset. */
export const DEFAULT_POOLS_MAX_CONTAINERS = 32;

export interface PoolSettings {
  /** Lowercase letters, digits and dashes; the pool's id is `hpool_<name>`. */
  name: string;
  profile: Profile;
  /** How many ready containers the pool keeps. */
  size: number;
  /** A pooled container not claimed this long after it was made is replaced. */
  maxAgeSeconds?: number;
}

const poolSchema = z.strictObject({
  name: z.string().regex(/^[a-z0-9-]{1,64}$/, 'lowercase letters, digits and dashes (at most 64)'),
  profile: profileSchema,
  size: z.number().int().min(1).max(1000),
  maxAgeSeconds: z.number().int().min(1).max(31_536_000).optional(),
});

const poolsSchema = z
  .array(poolSchema)
  .max(64)
  .refine((pools) => new Set(pools.map((p) => p.name)).size === pools.length, { message: 'pool names must be unique' });

const refuse = (problems: string[]): never => {
  throw new BerthError('invalid_request', `invalid configuration: ${problems.join('; ')}`, { problems });
};

/** The pools from the environment (none when neither variable is set); throws `invalid_request` naming each problem. */
export function resolvePools(env: NodeJS.ProcessEnv = process.env): PoolSettings[] {
  if (env.BERTH_POOLS && env.BERTH_POOLS_FILE) refuse(['BERTH_POOLS and BERTH_POOLS_FILE: set one of them']);
  const source = env.BERTH_POOLS ? 'BERTH_POOLS' : env.BERTH_POOLS_FILE ? 'BERTH_POOLS_FILE' : undefined;
  if (!source) return [];
  let text = env.BERTH_POOLS ?? '';
  if (source === 'BERTH_POOLS_FILE') {
    try {
      text = readFileSync(env.BERTH_POOLS_FILE!, 'utf8');
    } catch (e) {
      refuse([`BERTH_POOLS_FILE: cannot read ${env.BERTH_POOLS_FILE}: ${(e as Error).message}`]);
    }
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    refuse([`${source}: not JSON: ${(e as Error).message}`]);
  }
  const parsed = poolsSchema.safeParse(json);
  if (!parsed.success) refuse(parsed.error.issues.map((i) => `${source}${i.path.length ? `[${i.path.join('.')}]` : ''}: ${i.message}`));
  const pools = parsed.data!;
  const max = env.BERTH_POOLS_MAX_CONTAINERS ? Number(env.BERTH_POOLS_MAX_CONTAINERS) : DEFAULT_POOLS_MAX_CONTAINERS;
  if (!Number.isInteger(max) || max < 0) refuse(['BERTH_POOLS_MAX_CONTAINERS: must be a non-negative integer']);
  const total = pools.reduce((n, p) => n + p.size, 0);
  if (total > max) refuse([`${source}: the pools keep ${total} containers together, past BERTH_POOLS_MAX_CONTAINERS (${max})`]);
  return pools;
}
