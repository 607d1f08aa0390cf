/**
 * The sh lines the native launcher (launcher.sh) evaluates: quoted words, an exec of a program with exactly a given
 * environment, a supervisor run in the launcher's own subshell, and a spare supervisor's request and its command's
 * line. Only single-quoted words are ever built, so nothing the caller gives is interpreted by a shell.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { shellExportable } from '../command-env.ts';
import { SUPERVISOR_PATH } from '../spool.ts';

const ENV_PATHS = ['/usr/bin/env', '/bin/env'];
let envPath: string | null | undefined;

/** What a supervised run is: the supervisor's `run` options and the command. */
export interface SupervisedRun {
  /** The operation directory. */
  dir: string;
  cwd: string;
  graceMs: number;
  stdin: boolean;
  timeoutMs?: number;
  argv: string[];
}

/** One single-quoted sh word; a newline becomes the launcher's `$_l_nl`, so a request stays on one line. */
export const word = (s: string): string => `'${s.replace(/'/g, `'\\''`).replace(/\n/g, `'"$_l_nl"'`)}'`;

/** The launcher's own shell variables (words of a request expand `$_l_nl`): never exported in its subshell. */
const OWN_NAMES = /^_l_/;
export const plain = (names: string[]): boolean => names.every((k) => shellExportable(k) && !OWN_NAMES.test(k));

/**
 * The sh line that replaces the launcher's subshell with `argv` and exactly `env`. The subshell's only other
 * exported variable is PWD (any sh exports it; a started sh sets its own anyway). Plain names are exported by the
 * subshell itself; any other name needs `env -i` (one more exec), which takes every name as it is.
 */
export function execLine(argv: string[], env: Record<string, string>): string | Error {
  const names = Object.keys(env);
  if (plain(names)) return [...exportsOf(env), 'exec', ...argv.map(word)].join(' ');
  envPath ??= ENV_PATHS.find((p) => existsSync(p)) ?? null;
  if (!envPath) return new Error('env(1) is not installed');
  return ['exec', envPath, '-i', ...names.map((k) => word(`${k}=${env[k]}`)), ...argv.map(word)].join(' ');
}

const exportsOf = (env: Record<string, string>): string[] => Object.keys(env).map((k) => `export ${k}=${word(env[k])};`);

/**
 * The sh line that runs `supervisor.sh ARGS` in the launcher's subshell itself, which then answers its own end
 * (launcher.sh `rSEQ`), or by exec when `env` needs `env -i` (the launcher's waiter answers).
 */
export function supervisorRequest(args: string[], env: Record<string, string>): { line: string | Error; answersItself: boolean } {
  if (!plain(Object.keys(env))) return { line: execLine(['/bin/sh', SUPERVISOR_PATH, ...args], env), answersItself: false };
  return { line: [...exportsOf(env), '_bsv_main', ...args.map(word)].join(' '), answersItself: true };
}

/** supervisor.sh `run` arguments for a run. */
export const runArgs = (run: SupervisedRun): string[] => [
  'run',
  run.dir,
  '-C',
  run.cwd,
  '-g',
  String(run.graceMs),
  ...(run.stdin ? ['-i'] : []),
  ...(run.timeoutMs !== undefined ? ['-t', String(run.timeoutMs)] : []),
  '--',
  ...run.argv,
];

/**
 * The line a spare's command process evaluates to become the command: what the supervisor's own launch does
 * (redirections, cwd, the given environment and nothing else: `cd` adds OLDPWD, which goes), then exec.
 */
export function goLine(run: SupervisedRun, env: Record<string, string>): string {
  const stdin = run.stdin ? join(run.dir, 'stdin') : '/dev/null';
  return [
    `exec <${word(stdin)} >>${word(join(run.dir, 'stdout'))} 2>>${word(join(run.dir, 'stderr'))};`,
    `cd ${word(run.cwd)} || exit 126; unset OLDPWD;`,
    ...exportsOf(env),
    'exec',
    ...run.argv.map(word),
  ].join(' ');
}

/**
 * The pid-1 shell of a contained spare (supervisor.sh `_bsv_spare -o`): it says on fd 4 that the sandbox is up, waits
 * for its line on fd 3 (the spare's FIFO), lets go of the FIFO, and evaluates the line (containedGoLine).
 */
export const SPARE_PID_ONE = ['/bin/sh', '-c', `_l_nl='
'; echo >&4; exec 4>&-; IFS= read -r _l <&3 || exit 125; exec 3<&-; eval "$_l"; exit 125`, 'berth-init'];

/**
 * The line a contained spare's pid-1 shell evaluates: the caller's environment, the working directory (made first
 * when it is a directory of the private /tmp, as bwrap's --dir would), then the command as its child, as the
 * sandbox's ordinary pid 1 runs it (bubblewrap.ts). Its output files are already the operation's.
 */
export function containedGoLine(run: SupervisedRun, env: Record<string, string>, makeDir: boolean): string {
  return [
    ...exportsOf(env),
    ...(makeDir ? [`mkdir -p -- ${word(run.cwd)} &&`] : []),
    `cd -- ${word(run.cwd)} || exit 126; unset OLDPWD;`,
    ...run.argv.map(word),
    '; exit $?',
  ].join(' ');
}

/** A spare supervisor's request: its `run` arguments and the line of its command's process, as one brace group. */
export const spareRequest = (args: string[], go: string): string => `{ set -- ${args.map(word).join(' ')}; _bsv_go=${word(go)}; }\n`;
