/**
 * The variables a command reading a content version runs with (seed 001 §6), for providers that set them on the
 * host side: PATH led by its `.venv/bin` and `node_modules/.bin`, PYTHONPATH and NODE_PATH led by it, PROJECT_ROOT
 * naming it.
 */
import { DEFAULT_PATH } from './command-env.ts';

const prepend = (first: string, rest: string | undefined): string => (rest ? `${first}:${rest}` : first);

/** The variables a session of the version at `mount` runs with, over `env`. */
export function versionEnv(env: Record<string, string>, mount: string): Record<string, string> {
  return {
    ...env,
    PATH: prepend(`${mount}/.venv/bin:${mount}/node_modules/.bin`, env.PATH ?? DEFAULT_PATH),
    PYTHONPATH: prepend(mount, env.PYTHONPATH),
    NODE_PATH: prepend(`${mount}/node_modules`, env.NODE_PATH),
    PROJECT_ROOT: mount,
  };
}
