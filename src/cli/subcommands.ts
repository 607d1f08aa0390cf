/**
 * The shape of the remote nouns `berth workspace|session|turn SUBCOMMAND ARG… [flags]`: a table of subcommands, each
 * with its positionals and the flags it takes beyond the common ones (--json, --url, --token), run against a server.
 */
import type { Berth } from '../client/berth-client.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { remoteOptions, withServer } from './remote.ts';
import { writeLine } from './stdout-lines.ts';

type Options = Parameters<typeof parseCommandArgs>[1];
const commonOptions = { ...remoteOptions, json: { type: 'boolean' } } as const;
type Values<O extends Options> = ReturnType<typeof parseCommandArgs<O & typeof commonOptions>>['values'];
type CommonValues = { url?: string; token?: string; json?: boolean; help?: boolean };

/** Prints one result: its JSON (one line) with --json, else the text. */
export type Print = (json: unknown, text: string) => Promise<void>;

export interface Subcommand<O extends Options> {
  /** Its positionals, by name (each one required). */
  args: string[];
  /** The flags of `O` it takes. */
  flags?: (keyof O & string)[];
  run(berth: Berth, args: string[], values: Values<O>, print: Print): Promise<number | void>;
}

const COMMON = new Set(['help', ...Object.keys(commonOptions)]);

export function subcommands<O extends Options>(usage: string, options: O, table: Record<string, Subcommand<O>>) {
  return async (argv: string[]): Promise<number> => {
    const parsed = parseCommandArgs(argv, { ...options, ...commonOptions }, usage);
    const [values, positionals] = [parsed.values as CommonValues & Record<string, unknown>, parsed.positionals];
    const [name, ...args] = positionals;
    if (values.help) return void console.log(usage), 0;
    if (name === undefined) throw new UsageError(`name a subcommand: ${Object.keys(table).join(', ')}`, usage);
    const sub = table[name];
    if (!sub) throw new UsageError(`unknown subcommand "${name}"`, usage);
    if (args.length !== sub.args.length) throw new UsageError(`${name} takes ${sub.args.join(' ') || 'no arguments'}`, usage);
    const stray = Object.keys(values).find((flag) => !COMMON.has(flag) && !sub.flags?.includes(flag as keyof O & string));
    if (stray) throw new UsageError(`${name} does not take --${stray}`, usage);
    const print: Print = (json, text) => writeLine(values.json ? JSON.stringify(json) : text);
    return (await withServer(values, (berth) => sub.run(berth, args, values as unknown as Values<O>, print))) ?? 0;
  };
}

/** A flag of milliseconds: a non-negative integer. */
export function milliseconds(value: string | undefined, flag: string, usage: string): number | undefined {
  if (value === undefined) return undefined;
  const ms = Number(value);
  if (!Number.isInteger(ms) || ms < 0) throw new UsageError(`--${flag} takes milliseconds`, usage);
  return ms;
}
