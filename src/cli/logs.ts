/**
 * `berth logs [-f] [--tail N] EXECUTION`: prints an execution's output from the server — stdout to stdout, stderr to
 * stderr, a PTY's stream to stdout — and, once the execution has finished, its exit status on stderr. Without -f it
 * prints what exists now and stops; with -f it follows live until the execution ends (reconnecting from its cursors
 * when the connection drops). --tail N starts each stream at its last N lines.
 */
import type { Writable } from 'node:stream';
import type { ExecutionRecordJson } from '../../schemas/api.ts';
import { outputStreamSchema, outputStreams, type OutputStream } from '../../schemas/output.ts';
import { BerthError } from '../../schemas/errors.ts';
import { terminalStatuses } from '../../schemas/states.ts';
import type { Berth } from '../client/berth-client.ts';
import { parseCommandArgs, UsageError } from './command-args.ts';
import { exitStatusOf } from './exit-status.ts';
import { remoteOptions, withServer } from './remote.ts';
import { logsUsage } from './usage.ts';


const sinks: Record<OutputStream, Writable> = { stdout: process.stdout, stderr: process.stderr, pty: process.stdout };

export async function logsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandArgs(
    argv,
    { ...remoteOptions, follow: { type: 'boolean', short: 'f' }, stream: { type: 'string' }, tail: { type: 'string', short: 'n' } },
    logsUsage,
  );
  if (values.help) return void console.log(logsUsage), 0;
  if (positionals.length !== 1) throw new UsageError('name one execution', logsUsage);
  const only = values.stream === undefined ? undefined : outputStreamSchema.safeParse(values.stream);
  if (only && !only.success) throw new UsageError(`--stream takes stdout, stderr or pty, not "${values.stream}"`, logsUsage);
  const streams: readonly OutputStream[] = only?.success ? [only.data] : outputStreams;
  const tail = values.tail === undefined ? undefined : Number(values.tail);
  if (tail !== undefined && (!Number.isSafeInteger(tail) || tail < 0)) throw new UsageError(`--tail takes a number of lines, not "${values.tail}"`, logsUsage);

  return withServer(values, async (berth) => {
    const id = await executionId(berth, positionals[0]!);
    const cursors: Partial<Record<OutputStream, number>> = {};
    for (const stream of streams) cursors[stream] = await printStream(berth, id, stream, tail);
    const record = values.follow
      ? await berth.executions.follow(id, { cursors, ...handlers(streams) })
      : await berth.executions.get(id);
    if (terminalStatuses.has(record.status)) process.stderr.write(`berth: ${id} ${endText(record)}\n`);
    return 0;
  });
}

const handlers = (streams: readonly OutputStream[]) => {
  const print = (stream: OutputStream) => (streams.includes(stream) ? (chunk: Buffer) => void sinks[stream].write(chunk) : undefined);
  return { onStdout: print('stdout'), onStderr: print('stderr'), onPty: print('pty') };
};

/** `exited 0`, `exited 3`, `cancelled (exit status 130)`, `failed (exit status 125)`: as `berth exec` would exit. */
function endText(record: ExecutionRecordJson): string {
  const { code } = exitStatusOf(record);
  return record.status === 'exited' && typeof record.exitCode === 'number' ? `exited ${code}` : `${record.status} (exit status ${code})`;
}

async function executionId(berth: Berth, ref: string): Promise<string> {
  if (/^hexe_[0-9a-f]{32}$/.test(ref)) return ref;
  const [record] = await berth.executions.list({ operationId: ref });
  if (!record) throw new BerthError('not_found', `No execution has the id or operationId "${ref}".`, { ref });
  return record.id;
}

/** Prints what exists now of one stream (its last `tail` lines when given) and answers the cursor after it. */
async function printStream(berth: Berth, id: string, stream: OutputStream, tail: number | undefined): Promise<number> {
  const held: Buffer[] = [];
  let cursor = 0;
  for (;;) {
    const read = await berth.executions.output(id, { stream, cursor });
    if (read.data.length > 0) {
      if (tail === undefined) await write(sinks[stream], read.data);
      else held.push(read.data);
    }
    cursor = read.next;
    if (read.data.length === 0 || read.complete) break;
  }
  if (tail !== undefined) await write(sinks[stream], lastLines(Buffer.concat(held), tail));
  return cursor;
}

/** The last `n` lines of `data` (a final line without a newline counts as one). */
function lastLines(data: Buffer, n: number): Buffer {
  if (n === 0) return Buffer.alloc(0);
  let end = data.length;
  if (end > 0 && data[end - 1] === 0x0a) end--;
  let start = end;
  for (let lines = 0; start > 0; ) {
    if (data[start - 1] === 0x0a && ++lines === n) break;
    start--;
  }
  return data.subarray(start);
}

async function write(out: Writable, data: Buffer): Promise<void> {
  if (data.length > 0 && !out.write(data)) await new Promise((resolve) => out.once('drain', resolve));
}
