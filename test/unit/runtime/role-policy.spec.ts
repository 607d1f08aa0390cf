/** The role policy's pure decisions: what a member's profile becomes or why it is refused, and the quota checks. */
import { describe, expect, it } from 'vitest';
import { profileSchema } from '../../../schemas/profile.ts';
import { resolveRolePolicy } from '../../../src/runtime/config.ts';
import { assertQuota, assertWithinPolicy, defaultRolePolicy, effectiveProfile, outputLimitOf } from '../../../src/runtime/role-policy.ts';
import type { Caller } from '../../../src/runtime/runtime-api.ts';

const member: Caller = { scope: 'team-a', role: 'member' };
const admin: Caller = { scope: 'default', role: 'admin' };
const host = { ownership: 'borrowed' as const };
const managed = { ownership: 'managed' as const };
const profile = (asked: object) => profileSchema.parse(asked);

describe('role policy: profiles', () => {
  it('should contain a member\'s host profile and give its unset limits the ceilings', () => {
    expect(effectiveProfile(member, profile({}), host, defaultRolePolicy)).toEqual({
      provider: 'native',
      contain: true,
      memoryMb: 2048,
      cpus: 2,
      pidsLimit: 512,
      network: 'none',
    });
  });

  it('should refuse a member the host\'s network (its loopback services), and leave it to an admin', () => {
    expect(() => effectiveProfile(member, profile({ network: 'bridge' }), host, defaultRolePolicy)).toThrow(
      expect.objectContaining({ code: 'forbidden', detail: expect.objectContaining({ field: 'profile.network' }) }),
    );
    expect(effectiveProfile(member, profile({ provider: 'docker', network: 'bridge' }), managed, defaultRolePolicy).network).toBe('bridge');
    expect(effectiveProfile(member, profile({ provider: 'docker' }), managed, defaultRolePolicy).network).toBe('bridge');
    expect(effectiveProfile(admin, profile({ contain: true, network: 'bridge' }), host, defaultRolePolicy).network).toBe('bridge');
  });

  it('should refuse a member\'s uncontained host profile as forbidden, and leave an admin\'s as asked', () => {
    expect(() => effectiveProfile(member, profile({ contain: false }), host, defaultRolePolicy)).toThrow(
      expect.objectContaining({ code: 'forbidden', detail: expect.objectContaining({ field: 'profile.contain' }) }),
    );
    expect(effectiveProfile(admin, profile({ contain: false }), host, defaultRolePolicy)).toEqual({ provider: 'native', contain: false });
  });

  it('should not add containment to a managed provider\'s profile', () => {
    expect(effectiveProfile(member, profile({ provider: 'docker' }), managed, defaultRolePolicy).contain).toBeUndefined();
  });

  it('should refuse each limit over its ceiling with quota_exceeded naming it, its ceiling and the ask', () => {
    for (const [limit, requested] of [['memoryMb', 1_048_576], ['cpus', 3], ['pidsLimit', 513]] as const) {
      expect(() => effectiveProfile(member, profile({ provider: 'docker', [limit]: requested }), managed, defaultRolePolicy)).toThrow(
        expect.objectContaining({ code: 'quota_exceeded', detail: { quota: limit, limit: defaultRolePolicy.ceilings[limit], requested } }),
      );
    }
    expect(effectiveProfile(member, profile({ provider: 'docker', memoryMb: 2048, cpus: 2, pidsLimit: 512 }), managed, defaultRolePolicy)).toMatchObject({
      memoryMb: 2048,
    });
  });

  it('should hold a member\'s HOME and workspace sizes under their ceilings, and lower a default only to a ceiling below it', () => {
    for (const size of ['homeMb', 'workspaceMb'] as const) {
      expect(() => effectiveProfile(member, profile({ provider: 'docker', [size]: 4096 }), managed, defaultRolePolicy)).toThrow(
        expect.objectContaining({ code: 'quota_exceeded', detail: { quota: size, limit: 2048, requested: 4096 } }),
      );
      expect(effectiveProfile(member, profile({ provider: 'docker' }), managed, defaultRolePolicy)[size]).toBeUndefined();
      const small = { ...defaultRolePolicy, ceilings: { ...defaultRolePolicy.ceilings, [size]: 64 } };
      expect(effectiveProfile(member, profile({ provider: 'docker' }), managed, small)[size]).toBe(64);
      expect(effectiveProfile(admin, profile({ provider: 'docker', [size]: 4096 }), managed, small)[size]).toBe(4096);
    }
  });

  it('should refuse a network when the ceiling allows none, and default to none', () => {
    const closed = { ...defaultRolePolicy, ceilings: { ...defaultRolePolicy.ceilings, network: 'none' as const } };
    expect(() => effectiveProfile(member, profile({ provider: 'docker', network: 'bridge' }), managed, closed)).toThrow(
      expect.objectContaining({ code: 'quota_exceeded', detail: { quota: 'network', limit: 'none', requested: 'bridge' } }),
    );
    expect(effectiveProfile(member, profile({ provider: 'docker' }), managed, closed).network).toBe('none');
  });

  it('should refuse running a member\'s command on a host profile stored without containment', () => {
    expect(() => assertWithinPolicy(member, profile({}), host, defaultRolePolicy)).toThrow(expect.objectContaining({ code: 'forbidden' }));
    expect(() => assertWithinPolicy(member, profile({ contain: true }), host, defaultRolePolicy)).not.toThrow();
    expect(() => assertWithinPolicy(admin, profile({}), host, defaultRolePolicy)).not.toThrow();
  });
});

describe('role policy: quotas', () => {
  it('should admit below the limit and refuse at it, with {quota, limit, used}', () => {
    expect(() => assertQuota(member, 'environments', 3, 2)).not.toThrow();
    expect(() => assertQuota(member, 'environments', 3, 3)).toThrow(
      expect.objectContaining({ code: 'quota_exceeded', detail: { quota: 'environments', limit: 3, used: 3 } }),
    );
    expect(() => assertQuota(admin, 'environments', 3, 30)).not.toThrow();
  });

  it('should bound a member\'s output and not an admin\'s', () => {
    expect(outputLimitOf(member, defaultRolePolicy)).toBe(defaultRolePolicy.quotas.outputBytes);
    expect(outputLimitOf(admin, defaultRolePolicy)).toBeUndefined();
  });
});

describe('role policy: configuration', () => {
  it('should default to the documented values and read every variable', () => {
    expect(resolveRolePolicy({})).toEqual(defaultRolePolicy);
    const env = {
      BERTH_MEMBER_MAX_MEMORY_MB: '512',
      BERTH_MEMBER_MAX_CPUS: '0.5',
      BERTH_MEMBER_MAX_PIDS: '64',
      BERTH_MEMBER_MAX_HOME_MB: '128',
      BERTH_MEMBER_MAX_WORKSPACE_MB: '256',
      BERTH_MEMBER_NETWORK: 'none',
      BERTH_QUOTA_ENVIRONMENTS: '2',
      BERTH_QUOTA_CONCURRENT_EXECUTIONS: '1',
      BERTH_QUOTA_CONCURRENT_BUILDS: '2',
      BERTH_QUOTA_CONCURRENT_IMPORTS: '3',
      BERTH_QUOTA_OUTPUT_BYTES: '1048576',
      BERTH_QUOTA_SCOPE_OUTPUT_BYTES: '4194304',
      BERTH_QUOTA_WORKSPACES: '3',
      BERTH_QUOTA_LEASES: '5',
      BERTH_DISK_RESERVE_MB: '0',
    };
    expect(resolveRolePolicy(env)).toEqual({
      ceilings: { memoryMb: 512, cpus: 0.5, pidsLimit: 64, homeMb: 128, workspaceMb: 256, network: 'none' },
      quotas: { environments: 2, concurrentExecutions: 1, concurrentBuilds: 2, concurrentImports: 3, outputBytes: 1_048_576, scopeOutputBytes: 4_194_304, workspaces: 3, leases: 5 },
      diskReserveMb: 0,
    });
  });

  it('should name every bad variable in one invalid_request error', () => {
    expect(() => resolveRolePolicy({ BERTH_QUOTA_ENVIRONMENTS: '0', BERTH_MEMBER_NETWORK: 'host', BERTH_MEMBER_MAX_MEMORY_MB: 'lots', BERTH_DISK_RESERVE_MB: '-1' })).toThrow(
      expect.objectContaining({
        code: 'invalid_request',
        message: expect.stringMatching(/BERTH_MEMBER_MAX_MEMORY_MB.*BERTH_MEMBER_NETWORK.*BERTH_QUOTA_ENVIRONMENTS.*BERTH_DISK_RESERVE_MB/),
      }),
    );
  });
});
