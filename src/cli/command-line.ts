/**
 * The shared shape of `berth exec` and `berth run`: `[options] ENV -- COMMAND…`, with the options both take
 * (operation id, cwd, repeated NAME=VALUE env, timeout, -i, -t) checked in one place.
 */
import { parseCommandArgs, UsageError } from './command-args.ts';

export const commandLineOptions = {
  'operation-id': { type: 'string' },
  cwd: { type: 'string' },
  env: { type: 'string', multiple: true },
  timeout: { type: 'string' },
  interactive: { type: 'boolean', short: 'i' },
  tty: { type: 'boolean', short: 't' },
} as const;

type Options = Parameters<typeof parseCommandArgs>[1];
type Values<O extends Options> = ReturnType<typeof parseCommandArgs<O>>['values'];

type CommandLine<O extends Options, E> =
  | { help: true; values: Values<O> }
  | { help: false; values: Values<O>; environment: E; command: string[]; env: Record<string, string>; timeoutMs: number | undefined };

/** With `orSession`, a `--session` flag takes the environment's place (and the result has no environment). */
export function parseCommandLine<O extends Options>(argv: string[], options: O, usage: string): CommandLine<O, string>;
export function parseCommandLine<O extends Options>(argv: string[], options: O, usage: string, orSession: true): CommandLine<O, string | undefined>;
export function parseCommandLine<O extends Options>(argv: string[], options: O, usage: string, orSession = false) {
  const split = argv.indexOf('--');
  const parsed = parseCommandArgs(split < 0 ? argv : argv.slice(0, split), options, usage);
  const values = parsed.values as typeof parsed.values & { env?: string[]; timeout?: string; help?: boolean; session?: string };
  const command = split < 0 ? [] : argv.slice(split + 1);
  if (values.help) return { help: true as const, values: parsed.values };
  const bySession = orSession && values.session !== undefined;
  if (parsed.positionals.length !== (bySession ? 0 : 1) || command.length === 0) {
    throw new UsageError(bySession ? 'with --session name no environment: -- and the command' : 'name one environment, then -- and the command', usage);
  }
  const env = Object.fromEntries(
    (values.env ?? []).map((pair) => {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new UsageError(`--env takes NAME=VALUE, not "${pair}"`, usage);
      return [pair.slice(0, eq), pair.slice(eq + 1)];
    }),
  );
  const timeoutMs = values.timeout === undefined ? undefined : Number(values.timeout);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) throw new UsageError('--timeout takes milliseconds', usage);
  return { help: false as const, values: parsed.values, environment: parsed.positionals[0], command, env, timeoutMs };
}
