/**
 * Where a build's installers run (seed 001 §4, §9): the server's own toolchain, with no more privilege than a task.
 * With bubblewrap (the default on Linux hosts): the host root read-only, a private /tmp as HOME (npm's cache goes
 * there), Berth's data directory hidden (so no other environment and no session can be read), and only this
 * version's directory writable, bound at `/env/<slug>`, the path sessions will see it at (a venv records its own
 * absolute path). The network follows the profile (`network: none` unshares it). Without bubblewrap the installers
 * run on the host in the version directory itself (documented: nothing is hidden then).
 *
 * Docker environments build the same way, on the host toolchain, not inside their image (README: Environment content).
 * Each command runs in its own process group; a timeout or the runtime stopping kills the whole group.
 */
import { spawn } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Profile } from '../../schemas/profile.ts';
import type { ToolchainRunner } from '../content/toolchain.ts';
import { commandEnv } from '../providers/command-env.ts';
import { bubblewrapArgv, findBubblewrap } from '../providers/native/bubblewrap.ts';

export interface BuildToolchain {
  run: ToolchainRunner;
  /** The version directory as the installers see it. */
  workdir: string;
  env: Record<string, string>;
  /** Removes what the toolchain made for itself (a host-side HOME). */
  dispose(): Promise<void>;
}

/** Proxy and registry settings of the Berth process that a build may need to reach its package index. */
const PASSED_THROUGH = /^(https?_proxy|no_proxy|HTTPS?_PROXY|NO_PROXY|npm_config_registry|PIP_INDEX_URL|PIP_EXTRA_INDEX_URL)$/;

export async function buildToolchain(o: {
  dataDir: string;
  versionDir: string;
  slug: string;
  profile: Profile;
  scratch: string;
  signal: AbortSignal;
}): Promise<BuildToolchain> {
  const passed = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => PASSED_THROUGH.test(k) && v !== undefined)) as Record<string, string>;
  const bwrap = findBubblewrap();
  if (bwrap) {
    const workdir = `/env/${o.slug}`;
    const env = { ...commandEnv({ env: passed }), HOME: '/tmp', npm_config_cache: '/tmp/.npm' };
    const prefix = (cwd: string) =>
      bubblewrapArgv(bwrap, {
        hidden: [o.dataDir],
        binds: [{ source: o.versionDir, target: workdir }],
        network: o.profile.network,
        chdir: cwd,
      });
    return { run: processGroupRunner(o.signal, prefix), workdir, env, dispose: async () => undefined };
  }
  const home = path.join(o.scratch, 'home');
  await mkdir(home, { recursive: true });
  const env = { ...commandEnv({ env: passed }), HOME: home, npm_config_cache: path.join(home, '.npm') };
  return { run: processGroupRunner(o.signal), workdir: o.versionDir, env, dispose: () => rm(home, { recursive: true, force: true }) };
}

/** Runs each command (behind `prefix`, when sandboxed) in its own process group, killed on timeout or abort. */
function processGroupRunner(signal: AbortSignal, prefix?: (cwd: string) => string[]): ToolchainRunner {
  return (command) =>
    new Promise((resolve) => {
      const argv = prefix ? [...prefix(command.cwd), ...command.argv] : command.argv;
      const [file, ...args] = argv;
      if (signal.aborted) return resolve({ exitCode: null, error: 'the runtime is stopping' });
      const child = spawn(file, args, { cwd: prefix ? '/' : command.cwd, env: command.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
      let timedOut = false;
      const kill = () => {
        try {
          process.kill(-(child.pid as number), 'SIGKILL');
        } catch {
          // already gone
        }
      };
      const timer = command.timeoutMs === undefined ? undefined : setTimeout(() => ((timedOut = true), kill()), command.timeoutMs);
      signal.addEventListener('abort', kill, { once: true });
      const done = (exit: Parameters<typeof resolve>[0]) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', kill);
        resolve(exit);
      };
      child.stdout.on('data', (chunk: Buffer) => command.onOutput('stdout', chunk));
      child.stderr.on('data', (chunk: Buffer) => command.onOutput('stderr', chunk));
      child.on('error', (e) => done({ exitCode: null, error: e.message }));
      child.on('close', (exitCode, sig) => done({ exitCode, signal: sig, ...(timedOut ? { timedOut } : {}) }));
    });
}
