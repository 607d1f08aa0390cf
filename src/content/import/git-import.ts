/**
 * Import of a git repository (seed 001 §3.1): `git clone --depth 1 --branch <ref>` with the system git into staging,
 * with no hooks (an empty template and core.hooksPath=/dev/null), no `ext::` transport, local paths and file:// only
 * when allowed, no prompts, and a timeout that kills git's whole process group. Then `.git` is dropped, the checkout
 * is walked with lstat and links, special files and dependency directories are removed and counted, the caps are
 * applied, and the tree is landed like an archive's (but never wrapper-stripped: a repository's root is the project's).
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { lstat, mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { BerthError } from '../../../schemas/errors.ts';
import type { ContentLayout } from '../content-layout.ts';
import { contentLimits } from '../content-limits.ts';
import type { ImportOptions } from './archive-import.ts';
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
}

const DEFAULT_TIMEOUT_MS = 120_000;
const REMOTE_URL = /^(https?|ssh|git):\/\/[^\s]+$|^[\w.-]+@[\w.-]+:[^\s]+$/;
const LOCAL_URL = /^(file:\/\/|\/)[^\s]*$/;
const REF = /^(?!-)(?!.*\.\.)[\w./-]+$/;

export async function importGit(layout: ContentLayout, source: GitSource, options: GitImportOptions = {}): Promise<ImportResult> {
  const allowLocal = options.allowLocal ?? false;
  if (!(REMOTE_URL.test(source.url) || (allowLocal && LOCAL_URL.test(source.url)))) {
    throw invalid('git_url', 'The git URL is not an allowed https, http, ssh or git URL.', { url: source.url });
  }
  if (source.ref !== undefined && !REF.test(source.ref)) throw invalid('git_ref', 'The git ref is not a branch or tag name.', { ref: source.ref });

  const work = path.join(layout.staging, `git-${randomUUID()}`);
  const tree = path.join(work, 'tree');
  try {
    await mkdir(work, { recursive: true });
    await clone(source, tree, allowLocal, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    await rm(path.join(tree, '.git'), { recursive: true, force: true });
    const result = await sweepCheckout(tree, new ImportMeter(contentLimits(options.limits)));
    await landStaged(layout, tree, options.replace ?? false);
    return result;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

function clone(source: GitSource, dest: string, allowLocal: boolean, timeoutMs: number): Promise<void> {
  const args = [
    '-c', 'core.hooksPath=/dev/null',
    '-c', 'protocol.ext.allow=never',
    '-c', `protocol.file.allow=${allowLocal ? 'always' : 'never'}`,
    'clone', '--depth', '1', '--single-branch', '--no-tags', '--template=',
    ...(source.ref ? ['--branch', source.ref] : []),
    '--', source.url, dest,
  ];
  const env = {
    ...process.env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_LFS_SKIP_SMUDGE: '1',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
  };
  return new Promise((resolve, reject) => {
    const child = spawn('git', args, { env, stdio: ['ignore', 'ignore', 'pipe'], detached: true });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr = (stderr + text).slice(-4096);
    });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup(child.pid);
    }, timeoutMs);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(invalid('git_failed', `git could not be started: ${e.message}`));
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      if (timedOut) reject(invalid('git_timeout', `git clone did not finish within ${timeoutMs} ms.`, { timeoutMs }));
      else if (code !== 0) reject(invalid('git_failed', 'git clone failed.', { exitCode: code, stderr: stderr.trim() }));
      else resolve();
    });
  });
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Remove what must not land from a checkout, counting it, and apply the caps to what stays. */
async function sweepCheckout(tree: string, meter: ImportMeter): Promise<ImportResult> {
  const skipped = new SkipTally();
  let files = 0;
  let bytes = 0;
  const walk = async (dir: string, rel: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      const child = path.join(dir, entry.name);
      meter.entry();
      if (entry.isDirectory()) {
        if (DEPENDENCY_DIRS.has(entry.name)) {
          skipped.add(childRel, 'dependency_dir');
          await rm(child, { recursive: true, force: true });
        } else await walk(child, childRel);
      } else if (entry.isFile()) {
        const { size } = await lstat(child);
        meter.declare(size);
        files++;
        bytes += size;
      } else {
        skipped.add(childRel, entry.isSymbolicLink() ? 'symlink' : 'special_file');
        await rm(child, { force: true });
      }
    }
  };
  await walk(tree, '');
  return { files, bytes, skipped: skipped.count, skippedReasons: skipped.reasons() };
}

function invalid(reason: string, message: string, detail: Record<string, unknown> = {}): BerthError {
  return new BerthError('environment_invalid', message, { reason, ...detail });
}
