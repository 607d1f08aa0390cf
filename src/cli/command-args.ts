/**
 * Argument parsing shared by the commands (node:util parseArgs, strict), and the usage error a bad command line
 * becomes. Every command accepts `--help`.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

export class UsageError extends Error {
  readonly usage: string;
  constructor(message: string, usage: string) {
    super(message);
    this.usage = usage;
  }
}

type Options = NonNullable<ParseArgsConfig['options']>;
type HelpOption = { help: { type: 'boolean'; short: 'h' } };
/** Spelled out so the declaration build can name it (node:util does not export the options' type). */
type Parsed<O extends Options> = ReturnType<typeof parseArgs<{ args: string[]; options: O & HelpOption; allowPositionals: true; strict: true }>>;

export function parseCommandArgs<O extends Options>(argv: string[], options: O, usage: string): Parsed<O> {
  try {
    return parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (e) {
    throw new UsageError((e as Error).message, usage);
  }
}

/** Flags every command that reads the store takes. */
export const storeOptions = {
  'data-dir': { type: 'string' },
  store: { type: 'string' },
} as const;
