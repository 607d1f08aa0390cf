/**
 * The environment a command gets: a minimal base (PATH, HOME, LANG, USER, and TERM on a PTY) plus the caller's
 * explicit variables. Nothing else of Berth's own process environment (tokens, BERTH_*, store URLs, DOCKER_*,
 * cloud credentials) ever reaches a command.
 */
import { accessSync, constants } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { BerthError } from '../../schemas/errors.ts';

export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const DEFAULT_TERM = 'xterm-256color';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** The supervisor's own shell variables (supervisor.sh): it sets them, so a command could not get the caller's value. */
const RESERVED = /^_bsv_/;
/** Variables a POSIX shell (dash, busybox ash, bash) sets or reads for itself. */
const SHELL_OWN = /^(BASH.*|SHELLOPTS|POSIXLY_CORRECT|EUID|UID|PPID|IFS|ENV|OPTIND|OPTARG|PS[0-4]|LINENO|HIST.*|FUNCNAME|GROUPS|SHLVL|PWD|OLDPWD|_)$/;

/**
 * Whether a shell script can `export` the name and hand the value on exactly as given. Others need a start of
 * their own with that environment (env -i, or the exec's own Env).
 */
export const shellExportable = (name: string): boolean => NAME.test(name) && !RESERVED.test(name) && !SHELL_OWN.test(name);

/** Names a POSIX shell can carry, not the supervisor's; values without NUL (an argv/environ string cannot hold one). */
export function assertCommandEnv(env: Record<string, string>): void {
  for (const [name, value] of Object.entries(env)) {
    if (!NAME.test(name) || typeof value !== 'string' || value.includes('\0')) {
      throw new BerthError('invalid_request', 'Environment names are [A-Za-z_][A-Za-z0-9_]* and values hold no NUL byte.', { name });
    }
    if (RESERVED.test(name)) throw new BerthError('invalid_request', 'Environment names starting with _bsv_ are reserved.', { name });
  }
}

export interface CommandEnvOptions {
  /** The caller's variables; they win over the base. */
  env?: Record<string, string>;
  pty?: boolean;
  /** The identity commands run as (native: the host user running Berth). */
  user?: { name: string; home: string };
}

let host: { name: string; home: string } | undefined;
/** The account running Berth, looked up once (a passwd lookup per command shows in the execution latency). */
export function hostAccount(): { name: string; home: string } {
  if (!host) {
    const { username, homedir } = userInfo();
    host = { name: username, home: homedir };
  }
  return host;
}

/**
 * The base takes PATH and LANG from the host (the borrowed host's own tool locations and locale; neither is a
 * secret) and HOME/USER from the account, not from the environment.
 */
export function commandEnv(options: CommandEnvOptions = {}): Record<string, string> {
  const account = options.user ?? hostAccount();
  const base: Record<string, string> = {
    PATH: process.env.PATH || DEFAULT_PATH,
    HOME: account.home,
    USER: account.name,
    LANG: process.env.LANG || 'C.UTF-8',
  };
  if (options.pty) base.TERM = DEFAULT_TERM;
  const env = { ...base, ...options.env };
  assertCommandEnv(env);
  return env;
}

/** The first executable `name` on `path` (a PATH-style list), or undefined when none is installed there. */
export function findProgram(name: string, path: string = DEFAULT_PATH): string | undefined {
  for (const dir of path.split(':').filter(Boolean)) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {
      // not here
    }
  }
  return undefined;
}
