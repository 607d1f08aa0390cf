/**
 * Where a build's installers run (seed 001 §4, §9): the server's own toolchain, with no more privilege than a task.
 * With bubblewrap (the default on Linux hosts): as a contained command runs (the sandbox identity, a user namespace
 * without capabilities), the host root read-only, a private /tmp as HOME (npm's cache goes there), hidden what a
 * contained command's sandbox hides (Provider.hostSandbox: the data directory, the tokens file, host credentials,
 * the engine socket, the workspace roots, the server's home), and only this version's directory writable, bound at
 * `/env/<slug>`, the path sessions will see it at (a venv records its own absolute path). The directory is handed
 * to the sandbox identity for the build and taken back after, without following anything the build planted. The
 * network follows the profile (`network: none` unshares it), and so do memory, CPUs and pids: the build has a control
 * group of its own with the profile's limits. Without bubblewrap the installers run on the host in the version
 * directory itself (documented: nothing is hidden or limited then).
 *
 * Docker environments build inside their own image instead: a one-off container with an allocation's hardening
 * (src/providers/docker/build-container.ts) binding only this version's directory, writable, at `/env/<slug>`; the
 * steps run there as UID 1000, so the directory is handed to that UID for the build and taken back after (Berth must
 * run as root, or as UID 1000 itself). A program the image lacks fails its step with the image named.
 *
 * Host commands run in their own process group; a timeout or the runtime stopping kills the whole group (in a
 * container: removes the container).
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { copyFile, lchown, lstat, mkdir, readdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { Profile } from '../../../schemas/profile.ts';
import type { ToolchainRunner } from '../../content/toolchain.ts';
import { commandEnv } from '../../providers/command-env.ts';
import { AllocationLimits, limitsOf } from '../../providers/native/allocation-limits.ts';
import { bubblewrapArgv, findBubblewrap } from '../../providers/native/bubblewrap.ts';
import type { Provider } from '../../providers/provider.ts';
import { privilegeDropArgv, sandboxIdentity } from '../../providers/native/sandbox-identity.ts';
import { SandboxView } from '../../providers/native/sandbox-view.ts';
import type { ProviderRegistry } from '../provider-registry.ts';

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

export interface BuildToolchainOptions {
  buildId: string;
  environmentId: string;
  dataDir: string;
  versionDir: string;
  slug: string;
  profile: Profile;
  scratch: string;
  signal: AbortSignal;
  providers: ProviderRegistry;
}

export async function buildToolchain(o: BuildToolchainOptions): Promise<BuildToolchain> {
  const passed = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => PASSED_THROUGH.test(k) && v !== undefined)) as Record<string, string>;
  const provider = o.providers.get(o.profile.provider);
  if (provider.startBuildContainer) return containerToolchain(o, provider, passed);
  const bwrap = findBubblewrap();
  if (bwrap) {
    const workdir = `/env/${o.slug}`;
    // As hidden as a contained command (the data dir, tokens, host credentials, engine socket, workspace roots).
    const view = o.providers.hostSandbox() ?? new SandboxView(sandboxIdentity(), [o.dataDir, ...(process.env.BERTH_TOKENS_FILE ? [process.env.BERTH_TOKENS_FILE] : [])]);
    const identity = view.identity;
    const env = { ...commandEnv({ env: passed, user: { name: identity.name, home: '/tmp' } }), npm_config_cache: '/tmp/.npm' };
    const owner = await handOver(o.versionDir, identity.uid, identity.gid);
    try {
      view.reach(o.versionDir);
    } catch (e) {
      await owner.takeBack();
      throw e;
    }
    const limits = new AllocationLimits(o.dataDir);
    const group = `build-${o.buildId}`;
    const bounds = limitsOf(o.profile);
    try {
      if (bounds) limits.ensure(group, bounds);
    } catch (e) {
      await owner.takeBack();
      throw e;
    }
    const limitPrefix = bounds ? limits.prefix(group, bounds) : [];
    const prefix = (cwd: string) => [
      ...limitPrefix,
      ...privilegeDropArgv(identity),
      ...bubblewrapArgv(bwrap, {
        hidden: view.hidingTargets(),
        binds: [{ source: o.versionDir, target: workdir }],
        network: o.profile.network,
        chdir: cwd,
        unprivileged: true,
      }),
    ];
    const dispose = async () => {
      await owner.takeBack();
      await limits.remove(group);
    };
    return { run: processGroupRunner(o.signal, prefix), workdir, env, dispose };
  }
  const home = path.join(o.scratch, 'home');
  await mkdir(home, { recursive: true });
  const env = { ...commandEnv({ env: passed }), HOME: home, npm_config_cache: path.join(home, '.npm') };
  return { run: processGroupRunner(o.signal), workdir: o.versionDir, env, dispose: () => rm(home, { recursive: true, force: true }) };
}

/** The installers run in a one-off container of the Environment's image; only the version is bound, writable. */
async function containerToolchain(o: BuildToolchainOptions, provider: Provider, passed: Record<string, string>): Promise<BuildToolchain> {
  const workdir = `/env/${o.slug}`;
  const uid = provider.buildUid ?? 0;
  const owner = await handOver(o.versionDir, uid, uid);
  const container = await provider
    .startBuildContainer!({ buildId: o.buildId, environmentId: o.environmentId, profile: o.profile, binds: [{ source: o.versionDir, target: workdir }] })
    .catch(async (e: unknown) => {
      await owner.takeBack();
      throw e;
    });
  const stop = () => void container.remove().catch(() => undefined);
  o.signal.addEventListener('abort', stop, { once: true });
  if (o.signal.aborted) stop();
  return {
    run: (command) => container.run(command),
    workdir,
    env: { ...passed, PATH: container.path, HOME: '/tmp', npm_config_cache: '/tmp/.npm' },
    async dispose() {
      o.signal.removeEventListener('abort', stop);
      // Removed before the directory is taken back: nothing in the container can write it after.
      await container.remove();
      await owner.takeBack();
    },
  };
}

/**
 * The build writes the version as `uid` (the container's UID 1000, or the native sandbox identity): the directory is
 * handed to it for the build and taken back by Berth's own after (so no host account keeps a hold on a finished
 * version). Nothing to hand over when Berth already runs as that uid.
 */
async function handOver(dir: string, uid: number, gid: number): Promise<{ takeBack(): Promise<void> }> {
  const own = process.getuid?.();
  const ownGid = process.getgid?.() ?? 0;
  if (own === uid) return { takeBack: async () => undefined };
  if (own !== 0) {
    throw new BerthError('unavailable', `A build writes its version as UID ${uid}; Berth must run as root or as that UID (it runs as ${own}).`, {});
  }
  // Berth's own snapshot: nothing the build made is in it yet.
  await chownTree(dir, uid, gid);
  return { takeBack: () => takeBackTree(dir, own, ownGid) };
}

/** lchown of `dir` and everything under it (links themselves, never their targets). */
async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await lchown(dir, uid, gid);
  const entries = await readdir(dir, { withFileTypes: true });
  await Promise.all(
    entries.map((entry) => {
      const p = path.join(dir, entry.name);
      return entry.isDirectory() ? chownTree(p, uid, gid) : lchown(p, uid, gid);
    }),
  );
}

/**
 * Takes a tree the build wrote back, trusting nothing in it: each directory is made Berth's before it is read (from
 * then on only Berth can change its entries, so what lstat saw stays what it is); links are owned as links, never
 * followed; a file with more than one name is replaced by a copy of its own, so no later chmod or chown of it can
 * reach a file outside the version that shares its inode.
 */
async function takeBackTree(dir: string, uid: number, gid: number): Promise<void> {
  const st = await lstat(dir);
  if (!st.isDirectory()) return;
  await lchown(dir, uid, gid);
  for (const entry of await readdir(dir)) {
    const p = path.join(dir, entry);
    const e = await lstat(p);
    if (e.isDirectory()) await takeBackTree(p, uid, gid);
    else if (e.isFile() && e.nlink > 1) await ownCopy(p, uid, gid);
    else await lchown(p, uid, gid);
  }
}

async function ownCopy(file: string, uid: number, gid: number): Promise<void> {
  const copy = `${file}.berth-own-${process.pid}`;
  await copyFile(file, copy, constants.COPYFILE_EXCL);
  await lchown(copy, uid, gid);
  await rename(copy, file);
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
