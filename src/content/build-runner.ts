/**
 * Installs what a version's manifests declare (seed 001 §4), in this order, stopping at the first failure:
 *
 *   package.json      npm install --no-audit --no-fund --prefer-offline --no-update-notifier
 *                     (--prefer-offline: a warm npm cache is used without asking the registry; a package.json with
 *                     no dependencies needs no network at all)
 *   requirements.txt  python3 -m venv .venv, then .venv/bin/python -m pip install -r requirements.txt
 *   setup.sh          sh setup.sh (PATH starting with .venv/bin and node_modules/.bin, PROJECT_ROOT set)
 *
 * The log is the installers' own output, each step headed by its command line. `packages` lists what was installed
 * (`npm ls --json --all`, `pip list --format json`), gathered apart from the log.
 *
 * Isolation is the caller's: run it through a toolchain whose only writable place is the version directory, which
 * reads no other environment and no session (a container or bubblewrap binding just this version, at the path
 * sessions will see it: a venv records its own absolute path), with the privileges of a task of the owning tenant.
 * Run it before makeReadOnly(versionDir); nothing is written into a version after.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { BuildLog } from './build-log.ts';
import type { ToolchainRunner } from './toolchain.ts';
import { treeBytes } from './versions.ts';

export interface InstalledPackage {
  manager: 'npm' | 'pip';
  name: string;
  version: string;
}

export interface BuildOptions {
  /** The version directory on this host. */
  versionDir: string;
  /** The same directory as the toolchain sees it (default: versionDir). */
  workdir?: string;
  run: ToolchainRunner;
  /** The toolchain's environment (PATH, HOME, proxies, npm cache…). */
  env: Record<string, string>;
  stepTimeoutMs?: number;
  maxLogChars?: number;
  /** Live log text, as it comes. */
  onLog?: (text: string) => void;
}

export interface BuildResult {
  ok: boolean;
  log: string;
  /** Empty when ok; else why the build failed. */
  error: string;
  packages: InstalledPackage[];
  sizeBytes: number;
}

interface Step {
  argv: string[];
  /** Extra environment for this step. */
  env?: Record<string, string>;
}

export async function runBuild(options: BuildOptions): Promise<BuildResult> {
  const { versionDir, run } = options;
  const workdir = options.workdir ?? versionDir;
  const has = (name: string) => existsSync(path.join(versionDir, name));
  const log = new BuildLog(options.maxLogChars, options.onLog);
  const venvPython = path.posix.join(workdir, '.venv/bin/python');
  const baseEnv: Record<string, string> = { ...options.env, npm_config_update_notifier: 'false', PIP_DISABLE_PIP_VERSION_CHECK: '1' };

  const steps: Step[] = [];
  if (has('package.json')) steps.push({ argv: ['npm', 'install', '--no-audit', '--no-fund', '--prefer-offline', '--no-update-notifier'] });
  if (has('requirements.txt')) {
    steps.push({ argv: ['python3', '-m', 'venv', '.venv'] });
    steps.push({ argv: [venvPython, '-m', 'pip', 'install', '--no-input', '-r', 'requirements.txt'] });
  }
  if (has('setup.sh')) {
    const binPath = [path.posix.join(workdir, '.venv/bin'), path.posix.join(workdir, 'node_modules/.bin'), baseEnv.PATH].filter(Boolean).join(':');
    steps.push({ argv: ['sh', 'setup.sh'], env: { PATH: binPath, PROJECT_ROOT: workdir } });
  }

  let error = '';
  for (const step of steps) {
    log.append(`$ ${step.argv.join(' ')}\n`);
    const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
    const exit = await run({
      argv: step.argv,
      cwd: workdir,
      env: { ...baseEnv, ...step.env },
      timeoutMs: options.stepTimeoutMs,
      onOutput: (stream, chunk) => log.append(decoders[stream].write(chunk)),
    });
    log.append(decoders.stdout.end() + decoders.stderr.end());
    if (exit.exitCode !== 0) {
      error = describeFailure(step.argv, exit);
      log.append(`${error}\n`);
      break;
    }
  }

  const packages: InstalledPackage[] = [];
  if (!error) {
    if (has('package.json')) packages.push(...npmPackages(await capture(options, workdir, baseEnv, ['npm', 'ls', '--json', '--all'])));
    if (has('requirements.txt')) {
      packages.push(...pipPackages(await capture(options, workdir, baseEnv, [venvPython, '-m', 'pip', 'list', '--format', 'json'])));
    }
  }
  let sizeBytes = 0;
  try {
    sizeBytes = await treeBytes(versionDir);
  } catch (e) {
    // An installer left what cannot be walked (a tree past PATH_MAX, made with relative paths): not published.
    error ||= `the version could not be read back (${(e as NodeJS.ErrnoException).code ?? 'error'})`;
    log.append(`${error}\n`);
  }
  return { ok: !error, log: log.toString(), error, packages, sizeBytes };
}

function describeFailure(argv: string[], exit: { exitCode: number | null; signal?: string | null; error?: string; timedOut?: boolean }): string {
  const command = argv.slice(0, 2).join(' ');
  if (exit.error) return `${command} could not start: ${exit.error}`;
  if (exit.timedOut) return `${command} timed out`;
  if (exit.exitCode === null) return `${command} was killed by ${exit.signal ?? 'a signal'}`;
  return `${command} exited with code ${exit.exitCode}`;
}

/** A listing command's stdout (its exit code is not trusted: `npm ls` exits 1 on any oddity yet prints the tree). */
async function capture(options: BuildOptions, cwd: string, env: Record<string, string>, argv: string[]): Promise<string> {
  const chunks: Buffer[] = [];
  await options.run({ argv, cwd, env, timeoutMs: options.stepTimeoutMs, onOutput: (stream, chunk) => stream === 'stdout' && chunks.push(chunk) });
  return Buffer.concat(chunks).toString('utf8');
}

interface NpmTree {
  version?: string;
  dependencies?: Record<string, NpmTree>;
}

function npmPackages(json: string): InstalledPackage[] {
  const seen = new Map<string, InstalledPackage>();
  const walk = (deps: Record<string, NpmTree> | undefined) => {
    for (const [name, node] of Object.entries(deps ?? {})) {
      if (node.version && !seen.has(`${name}@${node.version}`)) seen.set(`${name}@${node.version}`, { manager: 'npm', name, version: node.version });
      walk(node.dependencies);
    }
  };
  walk(parseJson<NpmTree>(json)?.dependencies);
  return [...seen.values()].sort((a, b) => a.name.localeCompare(b.name));
}

function pipPackages(json: string): InstalledPackage[] {
  const list = parseJson<Array<{ name: string; version: string }>>(json) ?? [];
  return list.map(({ name, version }) => ({ manager: 'pip' as const, name, version }));
}

function parseJson<T>(text: string): T | undefined {
  try {
    return JSON.parse(text) as T;
  } catch {
    return undefined;
  }
}
