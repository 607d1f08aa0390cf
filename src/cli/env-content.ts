/**
 * The content side of `berth env` (seed 001 §3–4) over the EnvironmentCommands port: `push` streams a local folder
 * as a tar (the system tar; node_modules, .venv and .git left out: a build installs from the manifests) with
 * progress on stderr; `build --follow` prints the installers' log as it grows; a version's one-line summary.
 */
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { BerthError } from '../../schemas/errors.ts';
import type { BuildRecord, ImportResult, VersionList } from '../client/berth-client.ts';
import type { EnvironmentCommands } from './environment-commands.ts';
import { humanSize } from './human-size.ts';

/** Streams `dir` as a tar into the environment's source, counting bytes on stderr as they leave. */
export async function pushDirectory(port: EnvironmentCommands, id: string, dir: string, replace: boolean): Promise<ImportResult> {
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new BerthError('invalid_request', `${dir} is not a directory.`, { dir });
  const tar = spawn('tar', ['-cf', '-', '--exclude=./node_modules', '--exclude=node_modules', '--exclude=.venv', '--exclude=.git', '-C', dir, '.'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const tarExit = new Promise<number | null>((resolve) => tar.on('close', resolve));
  // Node discards a child's stdout that nobody reads when the child exits; the importer may start reading later
  // (after its own checks), so the bytes wait in a pipe of ours (with backpressure on tar) until it does.
  const archive = tar.stdout.pipe(new PassThrough());
  let sent = 0;
  let shown = 0;
  const progress = (final = false) => {
    if (!final && sent - shown < 1024 * 1024) return;
    shown = sent;
    // On a terminal each figure overwrites the last (and clears what a longer one left); elsewhere, one line each.
    const tty = process.stderr.isTTY;
    process.stderr.write(`${tty ? '\r' : ''}pushed ${humanSize(sent)}${tty ? '\x1b[K' : ''}${final || !tty ? '\n' : ''}`);
  };
  const counted = (async function* () {
    for await (const chunk of archive as AsyncIterable<Buffer>) {
      sent += chunk.length;
      progress();
      yield chunk;
    }
  })();
  const imported = await port.importArchive(id, counted, replace).then(
    (result) => ({ result }),
    (error: unknown) => ({ error }),
  );
  // Here, not at the stream's end: an importer may stop reading at the archive's end marker, before tar's padding.
  progress(true);
  // An import that stopped reading leaves tar blocked on a full pipe: end it, and report the import's error.
  const stopped = 'error' in imported && tar.exitCode === null && tar.kill();
  if ((await tarExit) !== 0 && !stopped) throw new BerthError('invalid_request', `tar could not read ${dir}.`, { dir });
  if ('error' in imported) throw imported.error;
  return imported.result;
}

/** Prints the build log as it grows until the build leaves `building`; returns the final record. */
export async function followBuild(port: EnvironmentCommands, id: string, version: number): Promise<BuildRecord> {
  let printed = 0;
  for (;;) {
    const record = await port.getBuild(id, version);
    // A log past its bound keeps its head and tail: print what is new, or all of it again when it was cut.
    const fresh = record.log.length >= printed ? record.log.slice(printed) : record.log;
    if (fresh) process.stdout.write(fresh);
    printed = record.log.length;
    if (record.status !== 'building') return record;
    await sleep(250);
  }
}

export const describeImport = (result: ImportResult): string => {
  const skipped = result.skipped ? `, ${result.skipped} skipped (${result.skippedReasons.map((r) => `${r.reason} ${r.count}`).join(', ')})` : '';
  return `${result.files} files, ${result.bytes} bytes${skipped}`;
};

export const describeVersion = (v: VersionList['versions'][number]): string =>
  [v.active ? '*' : ' ', `v${v.version}`, v.status, new Date(v.started_at * 1000).toISOString(), `${v.packages} packages`, v.error]
    .filter(Boolean)
    .join('  ');
