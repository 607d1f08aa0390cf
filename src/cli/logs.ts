/**
 * `berth logs [-f] EXECUTION`: prints an execution's output from a running server — stdout to stdout, stderr to
 * stderr, a PTY's stream to stdout. Without -f it prints what exists now and stops; with -f it follows live until
 * the execution is finished (reconnecting from its cursors when the connection drops).
 */
import type { Writable } from 'node:stream';
import { outputStreamSchema, outputStreams, type OutputStream } from '../../schemas/output.ts';
import { BerthError } from '../../schemas/errors.ts';
import type { Berth } from '../client/berth-client.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { connectRemote, isUnreachable, remoteOptions, remoteUsage, serverUrl, unreachable } from './remote.ts';

export const logsUsage = `usage: berth logs [-f] [--stream stdout|stderr|pty] [--url URL] [--token TOKEN] EXECUTION
  Prints the output of EXECUTION (its id, or the operationId it was submitted with); -f follows it until it ends.
${remoteUsage}`;

const sinks: Record<OutputStream, Writable> = { stdout: process.stdout, stderr: process.stderr, pty: process.stdout };

export async function logsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    { ...remoteOptions, follow: { type: 'boolean', short: 'f' }, stream: { type: 'string' } },
    logsUsage,
  );
  if (values.help) return void console.log(logsUsage), 0;
  if (positionals.length !== 1) throw new UsageError('name one execution', logsUsage);
  const only = values.stream === undefined ? undefined : outputStreamSchema.safeParse(values.stream);
  if (only && !only.success) throw new UsageError(`--stream takes stdout, stderr or pty, not "${values.stream}"`, logsUsage);
  const streams: readonly OutputStream[] = only?.success ? [only.data] : outputStreams;

  const berth = await connectRemote(values);
  try {
    const id = await executionId(berth, positionals[0]);
    if (values.follow) {
      const print = (stream: OutputStream) => (streams.includes(stream) ? (chunk: Buffer) => void sinks[stream].write(chunk) : undefined);
      await berth.executions.follow(id, { onStdout: print('stdout'), onStderr: print('stderr'), onPty: print('pty') });
    } else {
      for (const stream of streams) await printStream(berth, id, stream);
    }
    return 0;
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(serverUrl(values.url), error);
    throw error;
  }
}

async function executionId(berth: Berth, ref: string): Promise<string> {
  if (/^hexe_[0-9a-f]{32}$/.test(ref)) return ref;
  const [record] = await berth.executions.list({ operationId: ref });
  if (!record) throw new BerthError('not_found', `No execution has the id or operationId "${ref}".`, { ref });
  return record.id;
}

/** Every byte of one stream that exists now, read by cursor. */
async function printStream(berth: Berth, id: string, stream: OutputStream): Promise<void> {
  for (let cursor = 0; ; ) {
    const read = await berth.executions.output(id, { stream, cursor });
    if (read.data.length === 0) return;
    if (!sinks[stream].write(read.data)) await new Promise((resolve) => sinks[stream].once('drain', resolve));
    cursor = read.next;
    if (read.complete) return;
  }
}
