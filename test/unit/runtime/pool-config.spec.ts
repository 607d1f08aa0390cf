/** The admin's warm pools from the environment (pool-config.ts): parsed, bounded, and refused with every problem named. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isBerthError } from '../../../schemas/errors.ts';
import { resolvePools } from '../../../src/runtime/pools/pool-config.ts';

const pool = (name: string, size = 2, extra: object = {}) => ({ name, profile: { provider: 'docker' }, size, ...extra });
const refusal = (env: NodeJS.ProcessEnv): string => {
  try {
    resolvePools(env);
  } catch (e) {
    if (isBerthError(e, 'invalid_request')) return e.message;
    throw e;
  }
  throw new Error('accepted');
};

describe('warm pool settings', () => {
  it('should read none when neither variable is set, and the pools of BERTH_POOLS or BERTH_POOLS_FILE', () => {
    expect(resolvePools({})).toEqual([]);
    expect(resolvePools({ BERTH_POOLS: JSON.stringify([pool('py', 3, { maxAgeSeconds: 600 })]) })).toEqual([
      { name: 'py', profile: { provider: 'docker' }, size: 3, maxAgeSeconds: 600 },
    ]);
    const dir = mkdtempSync(join(tmpdir(), 'berth-pools-'));
    try {
      writeFileSync(join(dir, 'pools.json'), JSON.stringify([pool('a'), pool('b')]));
      expect(resolvePools({ BERTH_POOLS_FILE: join(dir, 'pools.json') }).map((p) => p.name)).toEqual(['a', 'b']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('should refuse bad settings, naming each problem', () => {
    expect(refusal({ BERTH_POOLS: '[{' })).toMatch(/BERTH_POOLS: not JSON/);
    expect(refusal({ BERTH_POOLS: JSON.stringify([pool('Bad Name', 0)]) })).toMatch(/\[0\.name\].*; BERTH_POOLS\[0\.size\]/);
    expect(refusal({ BERTH_POOLS: JSON.stringify([pool('a'), pool('a')]) })).toMatch(/unique/);
    expect(refusal({ BERTH_POOLS: JSON.stringify([{ ...pool('a'), profile: { provider: 'docker', memoryMb: 1 } }]) })).toMatch(/profile\.memoryMb/);
    expect(refusal({ BERTH_POOLS: '[]', BERTH_POOLS_FILE: '/x' })).toMatch(/set one of them/);
    expect(refusal({ BERTH_POOLS_FILE: '/nonexistent/pools.json' })).toMatch(/cannot read/);
  });

  it('should bound the containers all pools keep together by BERTH_POOLS_MAX_CONTAINERS (default 32)', () => {
    expect(refusal({ BERTH_POOLS: JSON.stringify([pool('a', 20), pool('b', 13)]) })).toMatch(/keep 33 containers together, past BERTH_POOLS_MAX_CONTAINERS \(32\)/);
    expect(resolvePools({ BERTH_POOLS: JSON.stringify([pool('a', 20), pool('b', 13)]), BERTH_POOLS_MAX_CONTAINERS: '33' })).toHaveLength(2);
    expect(refusal({ BERTH_POOLS: JSON.stringify([pool('a', 1)]), BERTH_POOLS_MAX_CONTAINERS: '-1' })).toMatch(/non-negative integer/);
  });
});
