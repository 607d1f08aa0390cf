/**
 * Import of a git repository (seed 001 §3.1): `git clone --depth 1 --branch <ref>` with the system git into staging,
 * with no hooks (an empty template and core.hooksPath=/dev/null), only the https, http, ssh and git transports
 * (local paths and file:// only when allowed), no redirects, none of the server's credential helpers or extra
 * headers, no prompts, and a timeout that kills git's whole process group, as does running out of room (the data
 * directory's reserve, looked at as git writes). The host must pass the host policy (git-host-policy.ts) and git is
 * pinned to the address that passed (git-remote.ts). Then `.git` is dropped, the checkout is walked with lstat and links, special
 * files, dependency directories and paths too deep for the data directory are removed and counted, the caps are
 * applied, and the tree is landed like an archive's (but never wrapper-stripped: a repository's root is the
 * project's). git's messages reach the caller with every absolute path taken out.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { lstat, mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { ContentLayout } from '../content-layout.ts';
import { contentLimits } from '../content-limits.ts';
import { withoutAbsolutePaths } from '../hide-paths.ts';
import { removeTree } from '../remove-tree.ts';
import type { Room } from '../room-check.ts';
import type { ImportOptions } from './archive-import.ts';
import { checkGitHost, gitHostAllowance } from './git-host-policy.ts';
import { parseGitRemote, type PinnedRemote } from './git-remote.ts';
import { ImportMeter } from './import-meter.ts';
import { SkipTally, type ImportResult } from './import-result.ts';
import { landStaged } from './land-staged.ts';
import { DEPENDENCY_DIRS } from './member-policy.ts';

export interface GitSource {
  url: string;
  /** A branch or tag; the remote's default branch when absent. */
  ref?: string;
}

export interface GitImportOptions extends ImportOptions {
  timeoutMs?: number;
  /** Allow local paths and file:// URLs (off by default: they would read the server's own disk). */
  allowLocal?: boolean;
  /** Hosts (names, addresses, subnets) an import may reach although they are loopback, private or this machine's. */
  allowHosts?: readonly string[];
}

const DEFAULT_TIMEOUT_MS = 120_000;
const REF = /^(?!-)(?!.*\.\.)[\w./-]+$/;

export async function importGit(layout: ContentLayout, source: GitSource, options: GitImportOptions = {}): Promise<ImportResult> {
  const allowLocal = options.allowLocal ?? false;
  const remote = parseGitRemote(source.url, allowLocal);
  if (source.ref !== undefined && !REF.test(source.ref)) throw invalid('git_ref', 'The git ref is not a branch or tag name.', { ref: source.ref });
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const deadline = Date.now() + timeoutMs;
  const pinned: PinnedRemote =
    remote.transport === 'local'
      ? { url: remote.url, config: [], env: {} }
      : remote.pin(await withinTimeout(checkGitHost(remote.host, gitHostAllowance(options.allowHosts ?? [])), timeoutMs));

  const work = path.join(layout.staging, `git-${randomUUID()}`);
  const tree = path.join(work, 'tree');
  try {
    await mkdir(work, { recursive: true });
    const limits = contentLimits(options.limits);
    await clone(pinned, source.ref, work, allowLocal, { deadline, timeoutMs, ...(options.room ? { room: options.room } : {}) }, new ImportMeter(limits));
    await removeTree(path.join(tree, '.git'));
    const result = await sweepCheckout(tree, layout.maxPathBytes, new ImportMeter(limits));
    await landStaged(layout, tree, options.replace ?? false);
    return result;
  } finally {
    await removeTree(work);
  }
}

/** git's own options for every command of an import: no hooks, only the allowed transports, nothing of the server's. */
function gitOptions(remote: PinnedRemote, allowLocal: boolean): string[] {
  return [
    '-c', 'core.hooksPath=/dev/null',
    '-c', 'protocol.allow=never',
    ...['https', 'http', 'ssh', 'git'].flatMap((name) => ['-c', `protocol.${name}.allow=always`]),
    '-c', `protocol.file.allow=${allowLocal ? 'always' : 'never'}`,
    '-c', 'http.followRedirects=false', // a public host must not send git on to an internal one
    '-c', 'credential.helper=', // the server's stored credentials are not a tenant's,
    '-c', 'http.extraHeader=', // nor are headers its global config sends everywhere
    ...remote.config,
  ];
}

/**
 * Clones into `<work>/tree`, run from `work` so that git's own messages name `tree`, not a server path. Nothing is
 * checked out until the commit's tree has passed the caps (listed from the objects, nothing written): a repository
 * of a few kilobytes can name the same blob a million times over (a git bomb), which a checkout would write out in
 * full, filling the server's disk, before anything after it could count.
 */
async function clone(remote: PinnedRemote, ref: string | undefined, work: string, allowLocal: boolean, bounds: Omit<GitRun, 'env'>, meter: ImportMeter): Promise<void> {
  const options = gitOptions(remote, allowLocal);
  const env = {
    ...process.env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_LFS_SKIP_SMUDGE: '1',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    ...remote.env,
  };
  const run: GitRun = { ...bounds, env };
  const clone = ['clone', '--depth', '1', '--single-branch', '--no-tags', '--no-checkout', '--template=', ...(ref ? ['--branch', ref] : []), '--', remote.url, 'tree'];
  await runGit(run, [...options, ...clone], work, 'git clone failed.');
  const tree = path.join(work, 'tree');
  await runGit(run, [...options, 'ls-tree', '-r', '-t', '-l', '-z', '--full-tree', 'HEAD'], tree, 'git could not list the commit.', listedEntries(meter));
  // The checkout writes what was listed: room for all of it is asked first (git writes faster than it is looked at).
  await run.room?.(meter.declaredBytes);
  await runGit(run, [...options, 'reset', '--quiet', '--hard', 'HEAD'], tree, 'git checkout failed.');
}

/** Counts each `ls-tree -l -z` record on the meter (an entry; a blob's size declared), which throws at a cap. */
function listedEntries(meter: ImportMeter): (chunk: Buffer) => void {
  let rest: Buffer = Buffer.alloc(0);
  return (chunk) => {
    rest = rest.length ? Buffer.concat([rest, chunk]) : chunk;
    for (let end = rest.indexOf(0); end >= 0; end = rest.indexOf(0)) {
      // "<mode> <type> <object> <size>\t<path>": the size is '-' for trees and submodules.
      const record = rest.subarray(0, end);
      const tab = record.indexOf(0x09);
      const fields = record.toString('latin1', 0, tab < 0 ? record.length : tab);
      rest = rest.subarray(end + 1);
      meter.entry();
      const size = Number(fields.trim().split(/ +/)[3]);
      if (Number.isSafeInteger(size) && size > 0) meter.declare(size);
    }
    if (rest.length > 64 * 1024) throw invalid('git_failed', 'git listed an entry that is too long.');
  };
}

/** What every git command of an import runs under. */
interface GitRun {
  env: NodeJS.ProcessEnv;
  /** The import's deadline (epoch ms) and its whole budget, for the message. */
  deadline: number;
  timeoutMs: number;
  /** Looked at before each command and every ROOM_LOOK_MS while it runs: a clone's pack and a checkout are git's writes. */
  room?: Room;
}

/** How often a running git command's room is looked at: git writes at disk speed, so the look overshoots by that much. */
const ROOM_LOOK_MS = 100;

/**
 * Runs git in `cwd` within the import's deadline and room (its whole process group killed past either); `onStdout`
 * may throw to stop it.
 */
async function runGit(run: GitRun, args: string[], cwd: string, failure: string, onStdout?: (chunk: Buffer) => void): Promise<void> {
  await run.room?.();
  const { env, deadline, timeoutMs, room } = run;
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { cwd, env, stdio: ['ignore', onStdout ? 'pipe' : 'ignore', 'pipe'], detached: true });
    let stderr = '';
    let stopped: unknown;
    const stop = (e: unknown) => {
      if (stopped !== undefined) return;
      stopped = e;
      killGroup(child.pid);
    };
    let looking = false;
    const looker = room && setInterval(() => {
      if (looking) return;
      looking = true;
      room().catch(stop).finally(() => (looking = false));
    }, ROOM_LOOK_MS);
    child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      stderr = (stderr + text).slice(-4096);
    });
    child.stdout?.on('data', (chunk: Buffer) => {
      if (stopped !== undefined) return;
      try {
        onStdout!(chunk);
      } catch (e) {
        stop(e);
      }
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, Math.max(1, deadline - Date.now()));
    child.on('error', (e) => {
      clearTimeout(timer);
      clearInterval(looker);
      reject(invalid('git_failed', `git could not be started: ${withoutAbsolutePaths(e.message)}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      clearInterval(looker);
      if (stopped !== undefined) reject(stopped);
      else if (timedOut) reject(timeout(timeoutMs));
      else if (code !== 0) reject(invalid('git_failed', failure, { exitCode: code, stderr: withoutAbsolutePaths(stderr.trim()) }));
      else resolve();
    });
  });
}

/** The host check in the import's time budget (a resolver that does not answer is a clone that does not finish). */
async function withinTimeout<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(timeout(timeoutMs)), timeoutMs);
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

const timeout = (timeoutMs: number) => invalid('git_timeout', `git clone did not finish within ${timeoutMs} ms.`, { timeoutMs });

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Remove what must not land from a checkout, counting it, and apply the caps to what stays. */
async function sweepCheckout(tree: string, maxPathBytes: number, meter: ImportMeter): Promise<ImportResult> {
  const skipped = new SkipTally();
  let files = 0;
  let bytes = 0;
  const walk = async (dir: string, rel: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      const child = path.join(dir, entry.name);
      meter.entry();
      if (Buffer.byteLength(childRel) > maxPathBytes) {
        skipped.add(childRel, 'path_too_long');
        await removeTree(child);
      } else if (entry.isDirectory()) {
        if (DEPENDENCY_DIRS.has(entry.name)) {
          skipped.add(childRel, 'dependency_dir');
          await removeTree(child);
        } else await walk(child, childRel);
      } else if (entry.isFile()) {
        const { size } = await lstat(child);
        meter.declare(size);
        files++;
        bytes += size;
      } else {
        skipped.add(childRel, entry.isSymbolicLink() ? 'symlink' : 'special_file');
        await removeTree(child);
      }
    }
  };
  await walk(tree, '');
  return { files, bytes, skipped: skipped.count, skippedReasons: skipped.reasons() };
}

function invalid(reason: string, message: string, detail: Record<string, unknown> = {}): BerthError {
  return new BerthError('environment_invalid', message, { reason, ...detail });
}
