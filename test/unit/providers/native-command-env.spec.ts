/** The filtered command environment: a minimal base, the caller's variables, nothing of the runtime's own. */
import { afterEach, describe, expect, it } from 'vitest';
import { commandEnv, DEFAULT_TERM } from '../../../src/providers/command-env.ts';

describe('commandEnv', () => {
  const secrets = { BERTH_TOKEN: 'tok', BERTH_DATA_DIR: '/data', DOCKER_HOST: 'tcp://x', GITHUB_TOKEN: 'ghp', BERTH_EVENTSTORE_URL: 'esdb://x' };
  afterEach(() => {
    for (const name of Object.keys(secrets)) delete process.env[name];
  });

  it('carries only PATH, HOME, USER and LANG (and TERM on a PTY) from the host', () => {
    Object.assign(process.env, secrets);
    expect(Object.keys(commandEnv()).sort()).toEqual(['HOME', 'LANG', 'PATH', 'USER']);
    expect(commandEnv({ pty: true }).TERM).toBe(DEFAULT_TERM);
    expect(Object.values(commandEnv({ pty: true }))).not.toContain('tok');
  });

  it('lets the caller set and override variables', () => {
    const env = commandEnv({ env: { PATH: '/env/x/.venv/bin:/usr/bin', PROJECT_ROOT: '/env/x' }, user: { name: 'agent', home: '/home/agent' } });
    expect(env).toEqual({ PATH: '/env/x/.venv/bin:/usr/bin', PROJECT_ROOT: '/env/x', HOME: '/home/agent', USER: 'agent', LANG: env.LANG });
  });

  it('rejects names a shell cannot carry and values with NUL', () => {
    expect(() => commandEnv({ env: { 'A-B': 'x' } })).toThrow(/Environment names/);
    expect(() => commandEnv({ env: { '1A': 'x' } })).toThrow(/Environment names/);
    expect(() => commandEnv({ env: { A: 'x\0y' } })).toThrow(/NUL/);
  });

  it("rejects the supervisor's own variable names, which it could not hand over", () => {
    expect(() => commandEnv({ env: { _bsv_dir: 'x' } })).toThrow(/reserved/);
    expect(commandEnv({ env: { _bsvdir: 'x' } })._bsvdir).toBe('x');
  });
});
