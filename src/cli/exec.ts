/**
 * `berth exec [-i] [-t] ENV -- COMMAND…` (or `--session S [--turn T]` instead of ENV: in a session, in one of its
 * tool turns' workspace): runs a command on a running `berth serve` through the typed client, like
 * `docker exec`: output streams live, -i forwards stdin, -t gives the command a terminal of this terminal's size
 * (kept in step on SIGWINCH; in raw mode Ctrl-C and Ctrl-D go to the command), and the exit code passes through.
 * Dropped connections and server restarts are followed transparently from the output cursors.
 */
import { on } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Writable } from 'node:stream';
import { isBerthApiError } from '../client/berth-api-error.ts';
import type { Berth, RunWhere } from '../client/berth-client.ts';
import type { TerminalSize } from '../client/execution-follower.ts';
import { UsageError } from './command-args.ts';
import { commandLineOptions, parseCommandLine } from './command-line.ts';
import { exitStatusOf } from './exit-status.ts';
import { connectRemote, findEnvironment, isUnreachable, remoteOptions, remoteUsage, serverUrl, unreachable } from './remote.ts';

export const execUsage = `usage: berth exec [-i] [-t] [--operation-id ID] [--cwd DIR] [--env NAME=VALUE]... [--timeout MS]
                  [--url URL] [--token TOKEN] ENV -- COMMAND [ARG...]
       berth exec [options] --session SESSION [--turn TURN] -- COMMAND [ARG...]
  Runs COMMAND in the environment ENV (id, name or slug) on a running server, streams its output and exits with its
  exit code (128+n when killed by signal n, 125 when it could not start or its outcome is unknown). -i forwards
  stdin; -t runs it on a terminal of this terminal's size. Without -t, Ctrl-C cancels the command (a second one
  detaches and leaves it running). A repeated --operation-id re-attaches to the first run instead of running twice.
  --session runs it in the session's environment; with --turn (a tool turn of that session: \`berth turn open\`) it
  runs in the session's workspace, its cwd relative to the session's, and holds the turn until it ends.
${remoteUsage}`;

const options = { ...remoteOptions, ...commandLineOptions, session: { type: 'string' }, turn: { type: 'string' } } as const;

const terminalSize = (): TerminalSize => ({ cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 });

export async function execCommand(argv: string[]): Promise<number> {
  const line = parseCommandLine(argv, options, execUsage, true);
  if (line.help) return void console.log(execUsage), 0;
  const { values, command, env, timeoutMs } = line;
  if (values.turn !== undefined && values.session === undefined) throw new UsageError('--turn needs the --session it belongs to', execUsage);

  const berth = await connectRemote(values);
  try {
    const where: RunWhere =
      line.environment === undefined ? { session: values.session!, ...(values.turn !== undefined ? { turn: values.turn } : {}) } : await findEnvironment(berth, line.environment);
    return await execute(berth, where, command, {
      operationId: values['operation-id'] ?? `exec-${randomUUID()}`,
      interactive: values.interactive ?? false,
      tty: values.tty ?? false,
      ...(values.cwd !== undefined ? { cwd: values.cwd } : {}),
      ...(Object.keys(env).length > 0 ? { env } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    });
  } catch (error) {
    if (isUnreachable(error)) throw unreachable(serverUrl(values.url), error);
    throw error;
  }
}

interface ExecOptions {
  operationId: string;
  interactive: boolean;
  tty: boolean;
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

async function execute(berth: Berth, where: RunWhere, command: string[], o: ExecOptions): Promise<number> {
  const undo: (() => void)[] = [];
  const stop = new AbortController();
  undo.push(() => stop.abort());
  if (o.interactive && o.tty && process.stdin.isTTY) {
    process.stdin.setRawMode(true);
    undo.push(() => process.stdin.setRawMode(false));
  }
  if (o.interactive) undo.push(() => process.stdin.destroy());

  let id: string | undefined;
  if (!(o.interactive && o.tty)) {
    // In raw mode Ctrl-C is a byte for the command; otherwise it cancels, and a second one detaches.
    let interrupts = 0;
    const onInterrupt = () => {
      if (++interrupts > 1 || !id) process.exit(130);
      process.stderr.write('berth: cancelling (Ctrl-C again to detach and leave it running)\n');
      void berth.executions.cancel(id).catch((e: unknown) => process.stderr.write(`berth: ${(e as Error).message}\n`));
    };
    process.on('SIGINT', onInterrupt);
    undo.push(() => process.off('SIGINT', onInterrupt));
  }

  try {
    const record = await berth.executions.run(where, command, {
      operationId: o.operationId,
      ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
      ...(o.env ? { env: o.env } : {}),
      ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
      ...(o.tty ? { pty: terminalSize(), sizes: resizes(stop.signal) } : {}),
      ...(o.interactive ? { stdin: process.stdin as AsyncIterable<Buffer> } : {}),
      onSubmitted: (r) => (id = r.id),
      onStdout: (chunk) => write(process.stdout, chunk),
      onStderr: (chunk) => write(process.stderr, chunk),
      onPty: (chunk) => write(process.stdout, chunk),
    });
    const { code, complaint } = exitStatusOf(record);
    if (complaint) process.stderr.write(`berth: ${complaint}\n`);
    return code;
  } catch (error) {
    if (isBerthApiError(error, 'operation_conflict')) {
      process.stderr.write('berth: that --operation-id already ran a different command\n');
    }
    throw error;
  } finally {
    undo.reverse().forEach((f) => f());
  }
}

const write = (out: Writable, chunk: Buffer) => void out.write(chunk);

/** This terminal's size after each SIGWINCH, until `signal` aborts. */
async function* resizes(signal: AbortSignal): AsyncGenerator<TerminalSize> {
  if (!process.stdout.isTTY) return;
  try {
    for await (const _ of on(process, 'SIGWINCH', { signal })) yield terminalSize();
  } catch (error) {
    if (!signal.aborted) throw error;
  }
}
