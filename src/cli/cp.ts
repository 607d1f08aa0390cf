/**
 * `berth cp SRC DST`: copies files between this machine and a session's workspace through the turn file tools, in a
 * turn of its own (opened and always released) or in an open one named with --turn. Each file is one streamed PUT
 * (upload) or one read (download); -r copies directory trees, skipping links and special files.
 */
import { createReadStream } from 'node:fs';
import { lstat, mkdir, readdir, stat, writeFile } from 'node:fs/promises';
import { basename, join, posix, resolve } from 'node:path';
import { BerthError } from '../../schemas/errors.ts';
import { isBerthApiError } from '../client/berth-api-error.ts';
import { FILE_LIMIT_BYTES, type TurnFiles } from '../client/turn-files.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { humanSize } from './human-size.ts';
import { remoteOptions, withServer } from './remote.ts';
import { milliseconds } from './subcommands.ts';
import { busyExplained } from './turn.ts';
import { cpUsage } from './usage.ts';


const options = { ...remoteOptions, turn: { type: 'string' }, wait: { type: 'string' }, recursive: { type: 'boolean', short: 'r' } } as const;

/** `SESSION:PATH`: a session id (no slash) before the first colon. */
const REMOTE = /^([A-Za-z0-9][A-Za-z0-9_.-]*):(.*)$/;

interface RemotePath {
  session: string;
  path: string;
}

function remoteOf(arg: string): RemotePath | undefined {
  const match = REMOTE.exec(arg);
  return match ? { session: match[1]!, path: posix.normalize(match[2] || '.').replace(/^\.\/?$/, '') } : undefined;
}

export async function cpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, options, cpUsage);
  if (values.help) return void console.log(cpUsage), 0;
  if (positionals.length !== 2) throw new UsageError('name SRC and DST', cpUsage);
  const [from, to] = positionals as [string, string];
  const [src, dst] = [remoteOf(from), remoteOf(to)];
  if (Boolean(src) === Boolean(dst)) throw new UsageError('one of SRC and DST is SESSION:PATH, the other a host path', cpUsage);
  const waitMs = milliseconds(values.wait, 'wait', cpUsage);
  const recursive = values.recursive ?? false;
  const { session } = (src ?? dst)!;
  const copy = (files: TurnFiles) => (src ? download(files, src.path, to, recursive) : upload(files, from, dst!.path, recursive));

  await withServer(values, async (berth) => {
    if (values.turn !== undefined) return copy(berth.turns.files(session, values.turn));
    return busyExplained(berth.turns.with(session, ({ files }) => copy(files), waitMs !== undefined ? { waitMs } : {}));
  });
  return 0;
}

const note = (text: string) => process.stderr.write(`berth: ${text}\n`);

const tooLarge = (host: string, size: number, max = FILE_LIMIT_BYTES) =>
  new BerthError('file_too_large', `${host} is ${size} bytes: workspace files are at most ${max} bytes (${humanSize(max)}).`, { max_bytes: max });

async function isRemoteDirectory(files: TurnFiles, path: string): Promise<boolean> {
  if (path === '') return true;
  try {
    return (await files.stat(path)).type === 'directory';
  } catch (error) {
    if (isBerthApiError(error, 'not_found')) return false;
    throw error;
  }
}

async function upload(files: TurnFiles, host: string, remote: string, recursive: boolean): Promise<void> {
  const info = await stat(host);
  const into = remote === '' || (await isRemoteDirectory(files, remote));
  const target = into ? posix.join(remote, basename(resolve(host))) : remote;
  if (info.isDirectory()) {
    if (!recursive) throw new BerthError('invalid_request', `${host} is a directory: -r copies it.`);
    await files.mkdir(target, { parents: true });
    return uploadTree(files, host, target);
  }
  if (!info.isFile()) throw new BerthError('invalid_request', `${host} is not a regular file.`);
  await uploadFile(files, host, target, info.size);
}

async function uploadTree(files: TurnFiles, host: string, remote: string): Promise<void> {
  for (const entry of (await readdir(host, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
    const [from, to] = [join(host, entry.name), posix.join(remote, entry.name)];
    if (entry.isDirectory()) {
      await files.mkdir(to, { parents: true });
      await uploadTree(files, from, to);
    } else if (entry.isFile()) await uploadFile(files, from, to, (await lstat(from)).size);
    else note(`skipped ${from} (not a regular file or directory)`);
  }
}

async function uploadFile(files: TurnFiles, host: string, remote: string, size: number): Promise<void> {
  if (size > FILE_LIMIT_BYTES) throw tooLarge(host, size);
  try {
    await files.write(remote, createReadStream(host));
  } catch (error) {
    // The file grew past the limit while it was sent, or the server's limit is lower.
    if (isBerthApiError(error, 'file_too_large')) throw tooLarge(host, (await stat(host)).size, Number(error.detail.max_bytes) || FILE_LIMIT_BYTES);
    throw error;
  }
}

async function download(files: TurnFiles, remote: string, host: string, recursive: boolean): Promise<void> {
  const info = remote === '' ? undefined : await files.stat(remote);
  const into = await stat(host).then((s) => s.isDirectory(), () => false);
  const target = into ? join(host, remote === '' ? '.' : posix.basename(remote)) : host;
  if (info === undefined || info.type === 'directory') {
    if (!recursive) throw new BerthError('invalid_request', `${remote || 'the workspace root'} is a directory: -r copies it.`);
    await mkdir(target, { recursive: true });
    return downloadTree(files, remote, target);
  }
  if (info.type !== 'file') throw new BerthError('invalid_request', `${remote} is not a regular file.`);
  await writeFile(target, (await files.read(remote)).data);
}

async function downloadTree(files: TurnFiles, remote: string, host: string): Promise<void> {
  for await (const entry of files.iterate(remote)) {
    // A name is one component: one that is not would write outside `host`.
    if (entry.name.includes('/') || entry.name === '.' || entry.name === '..') {
      note(`skipped ${JSON.stringify(entry.name)}: not a file name`);
      continue;
    }
    const to = join(host, entry.name);
    if (entry.type === 'directory') {
      await mkdir(to, { recursive: true });
      await downloadTree(files, entry.path, to);
    } else if (entry.type === 'file') await writeFile(to, (await files.read(entry.path)).data);
    else note(`skipped ${entry.path} (not a regular file or directory)`);
  }
}
