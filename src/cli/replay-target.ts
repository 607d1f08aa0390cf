/**
 * What `berth replay` takes besides a stream name: a bare resource id (`hexe_…` is the stream `execution-hexe_…`),
 * mapped through one table of the ids the runtime hands out, or `--operation OPID` for an execution.
 */
import { UsageError } from './command-args.ts';

/** The ids the runtime gives its resources, each with its stream's category; the first match wins. */
const categoryOfId: ReadonlyArray<readonly [RegExp, string]> = [
  [/^henv_[0-9a-f]{32}-\d+$/, 'build'], // a build is named by its environment and content version
  [/^henv_/, 'environment'],
  [/^halloc_/, 'allocation'],
  [/^hses_/, 'session'],
  [/^hexe_/, 'execution'],
  [/^hhrn_/, 'harness'],
  [/^hwsp_/, 'workspace'],
  [/^htrn_/, 'turn'],
  [/^hlse_/, 'lease'],
];

/** The stream a replay argument names: a bare id becomes `<category>-<id>`; anything else is a stream name already. */
export function streamOfTarget(target: string): string {
  const category = categoryOfId.find(([pattern]) => pattern.test(target))?.[1];
  return category ? `${category}-${target}` : target;
}

/**
 * The stream named by the positionals or by --operation (exactly one of the two); `executionIdOf` turns an
 * operationId into its execution's id the way the mode at hand can (hashed with the scope locally, asked over HTTP).
 */
export async function replayStream(
  positionals: string[],
  operationId: string | undefined,
  executionIdOf: (operationId: string) => Promise<string>,
  usage: string,
): Promise<string> {
  if (operationId !== undefined) {
    if (positionals.length > 0) throw new UsageError('name a stream or an id, or give --operation, not both', usage);
    return `execution-${await executionIdOf(operationId)}`;
  }
  if (positionals.length !== 1) throw new UsageError('name exactly one stream (or an id, or --operation OPID)', usage);
  return streamOfTarget(positionals[0]!);
}
