/**
 * `berth env push|build|versions|activate`: an environment's content on a running `berth serve` (seed 001 §3–4),
 * through its HTTP API in the token's scope (--url / BERTH_URL, --token / BERTH_TOKEN, as the other remote commands).
 * `push` streams a local folder as a tar (the system tar; node_modules, .venv and .git left out: a build installs
 * from the manifests) with progress on stderr; `build --follow` prints the installers' log as it grows.
 */
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { BerthError } from '../../schemas/errors.ts';
import { BerthApiError } from '../client/berth-api-error.ts';
import { HttpTransport } from '../client/http-transport.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { connectRemote, findEnvironment, isUnreachable, remoteOptions, remoteUsage, serverToken, serverUrl, unreachable } from './remote.ts';
import { writeLine } from './stdout-lines.ts';

export const envContentUsage = `usage: berth env push ENV DIR [--replace]
       berth env build ENV [--follow]
       berth env versions ENV
       berth env activate ENV VERSION
  push imports DIR into ENV's source as a tar stream (node_modules, .venv and .git left out), with --replace clearing
  the source first; build starts the next version (--follow prints the installers' log until it is ready or failed);
  versions lists every build and the active one; activate makes a finished version the active one. ENV is an id,
  name or slug. Common flags: --json. They ask a running server:
${remoteUsage}`;

export const contentSubcommands = new Set(['push', 'build', 'versions', 'activate']);

const options = { ...remoteOptions, json: { type: 'boolean' }, replace: { type: 'boolean' }, follow: { type: 'boolean' } } as const;
const arity: Record<string, number> = { push: 2, build: 1, versions: 1, activate: 2 };

interface VersionJson {
  version: number;
  status: string;
  started_at: number;
  finished_at: number | null;
  packages: number;
  error: string;
  active: boolean;
}

export async function envContentCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(argv, options, envContentUsage);
  if (values.help) return void console.log(envContentUsage), 0;
  const [sub, ...args] = positionals as [string, ...string[]];
  if (args.length !== arity[sub]) throw new UsageError(`wrong number of arguments for env ${sub}`, envContentUsage);
  const url = serverUrl(values.url);
  try {
    const berth = await connectRemote(values);
    if (!berth.capabilities.environments) throw new BerthError('not_found', `The server at ${url} does not implement environment content.`);
    const http = new HttpTransport(url, serverToken(values.token));
    const env = encodeURIComponent(await findEnvironment(berth, args[0]!));
    const print = (x: unknown, text: string) => writeLine(values.json ? JSON.stringify(x) : text);
    switch (sub) {
      case 'push': {
        const result = await push(http, env, args[1]!, values.replace ?? false);
        const skipped = result.skipped ? `, ${result.skipped} skipped (${result.skippedReasons.map((r: { reason: string; count: number }) => `${r.reason} ${r.count}`).join(', ')})` : '';
        await print(result, `${result.files} files, ${result.bytes} bytes${skipped}`);
        break;
      }
      case 'build': {
        const started = await http.json<{ version: number; status: string }>('POST', `/v1/environments/${env}/build`);
        if (!values.follow) {
          await print(started, `version ${started.version} ${started.status}`);
          break;
        }
        const record = await follow(http, env, started.version);
        await print(record, `version ${record.version} ${record.status}${record.error ? `: ${record.error}` : ''}`);
        return record.status === 'ready' ? 0 : 1;
      }
      case 'versions': {
        const list = await http.json<{ versions: VersionJson[] }>('GET', `/v1/environments/${env}/versions`);
        if (values.json) await writeLine(JSON.stringify(list));
        else for (const v of list.versions) await writeLine(describeVersion(v));
        break;
      }
      case 'activate': {
        const version = Number(args[1]);
        if (!Number.isSafeInteger(version) || version < 1) throw new UsageError(`a version is a positive integer, not "${args[1]}"`, envContentUsage);
        const list = await http.json<{ active: number }>('POST', `/v1/environments/${env}/versions/${version}/activate`);
        await print(list, `version ${list.active} active`);
        break;
      }
    }
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(url, error);
    throw error;
  }
  return 0;
}

const describeVersion = (v: VersionJson): string =>
  [
    v.active ? '*' : ' ',
    `v${v.version}`,
    v.status,
    new Date(v.started_at * 1000).toISOString(),
    `${v.packages} packages`,
    v.error,
  ]
    .filter(Boolean)
    .join('  ');

/** Streams `dir` as a tar to the import endpoint, counting bytes on stderr as they leave. */
async function push(http: HttpTransport, env: string, dir: string, replace: boolean): Promise<any> {
  if (!statSync(dir, { throwIfNoEntry: false })?.isDirectory()) throw new BerthError('invalid_request', `${dir} is not a directory.`, { dir });
  const tar = spawn('tar', ['-cf', '-', '--exclude=./node_modules', '--exclude=node_modules', '--exclude=.venv', '--exclude=.git', '-C', dir, '.'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const tarExit = new Promise<number | null>((resolve) => tar.on('close', resolve));
  let sent = 0;
  let shown = 0;
  const progress = (final = false) => {
    if (!final && sent - shown < 1024 * 1024) return;
    shown = sent;
    process.stderr.write(`${process.stderr.isTTY ? '\r' : ''}pushed ${(sent / 1024 / 1024).toFixed(1)} MiB${final || !process.stderr.isTTY ? '\n' : ''}`);
  };
  const body = Readable.from(
    (async function* () {
      for await (const chunk of tar.stdout as AsyncIterable<Buffer>) {
        sent += chunk.length;
        progress();
        yield chunk;
      }
      progress(true);
    })(),
  );
  const response = await fetch(http.url(`/v1/environments/${env}/import`, { replace: replace ? 'true' : undefined }), {
    method: 'POST',
    headers: { authorization: http.authorization, 'content-type': 'application/x-tar' },
    body: body as unknown as BodyInit,
    duplex: 'half',
  } as RequestInit);
  const text = await response.text();
  if ((await tarExit) !== 0) throw new BerthError('invalid_request', `tar could not read ${dir}.`, { dir });
  if (!response.ok) throw BerthApiError.fromBody(response.status, text);
  return JSON.parse(text);
}

/** Prints the build log as it grows until the build leaves `building`; returns the final record. */
async function follow(http: HttpTransport, env: string, version: number): Promise<{ version: number; status: string; error: string }> {
  let printed = 0;
  for (;;) {
    const record = await http.json<{ version: number; status: string; error: string; log: string }>('GET', `/v1/environments/${env}/builds/${version}`);
    // A log past its bound keeps its head and tail: print what is new, or all of it again when it was cut.
    const fresh = record.log.length >= printed ? record.log.slice(printed) : record.log;
    if (fresh) process.stdout.write(fresh);
    printed = record.log.length;
    if (record.status !== 'building') return record;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}
