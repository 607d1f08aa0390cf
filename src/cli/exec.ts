/**
 * `berth exec [-i] [-t] [-d] ENV -- COMMAND…` (or `--session S [--turn T]` instead of ENV: in a session, in one of
 * its tool turns' workspace): runs a command on the server found by remote.ts through the typed client, like
 * `docker exec`: output streams live, -i forwards stdin, -t gives the command a terminal of this terminal's size
 * (kept in step on SIGWINCH; in raw mode Ctrl-C and Ctrl-D go to the command), and the exit code passes through.
 * With no server it runs through a runtime in this process (run.ts). Detaching (--detach, or Ctrl-C twice) leaves
 * the command running and prints how to follow it. Dropped connections and server restarts are followed
 * transparently from the output cursors.
 */
import { on } from 'node:events';
import { randomUUID } from 'node:crypto';
import type { Writable } from 'node:stream';
import { isBerthError } from '../../schemas/errors.ts';
import { isBerthApiError } from '../client/berth-api-error.ts';
import type { Berth, RunWhere } from '../client/berth-client.ts';
import type { TerminalSize } from '../client/execution-follower.ts';
import { UsageError } from './command-args.ts';
import { commandLineOptions, parseCommandLine } from './command-line.ts';
import { exitStatusOf, FAILED_EXIT } from './exit-status.ts';
import { findServer, remoteOptions, withServer, type ServerTarget } from './remote.ts';
import { execUsage } from './usage.ts';


const options = {
  ...remoteOptions,
  ...commandLineOptions,
  session: { type: 'string' },
  turn: { type: 'string' },
  detach: { type: 'boolean', short: 'd' },
} as const;

const terminalSize = (): TerminalSize => ({ cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 });

/** How long a first Ctrl-C waits for a second (detach) before it cancels the command. */
const DETACH_WINDOW_MS = 1_000;

export async function execCommand(argv: string[]): Promise<number> {
  const line = parseCommandLine(argv, options, execUsage, true);
  if (line.help) return void console.log(execUsage), 0;
  const { values } = line;
  if (values.turn !== undefined && values.session === undefined) throw new UsageError('--turn needs the --session it belongs to', execUsage);
  const server = await findServer(values);
  const inProcess = !server && values.session === undefined && !values.detach && values.token === undefined;
  const ran = inProcess ? import('./run.ts').then((m) => m.runCommand(argv)) : onServer(line, server);
  // Berth's side failing (no such environment, no engine, no server) is 125, apart from the command's own codes.
  return ran.catch((error: unknown) => {
    if (!isBerthError(error) && !isBerthApiError(error)) throw error;
    process.stderr.write(`berth: ${error.message}\n`);
    return FAILED_EXIT;
  });
}

function onServer(line: Extract<ReturnType<typeof parseCommandLine<typeof options>>, { help: false }>, server: ServerTarget | undefined): Promise<number> {
  const { values, command, env, timeoutMs } = line;
  return withServer(
    values,
    async (berth) => {
      const where: RunWhere =
        line.environment === undefined ? { session: values.session!, ...(values.turn !== undefined ? { turn: values.turn } : {}) } : line.environment;
      return execute(berth, where, command, {
        operationId: values['operation-id'] ?? `exec-${randomUUID()}`,
        interactive: values.interactive ?? false,
        tty: values.tty ?? false,
        detach: values.detach ?? false,
        ...(values.cwd !== undefined ? { cwd: values.cwd } : {}),
        ...(Object.keys(env).length > 0 ? { env } : {}),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      });
    },
    server,
  );
}

interface ExecOptions {
  operationId: string;
  interactive: boolean;
  tty: boolean;
  detach: boolean;
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs?: number;
}

async function execute(berth: Berth, where: RunWhere, command: string[], o: ExecOptions): Promise<number> {
  const submit = {
    operationId: o.operationId,
    ...(o.cwd !== undefined ? { cwd: o.cwd } : {}),
    ...(o.env ? { env: o.env } : {}),
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
  };
  if (o.detach) {
    const record = await berth.executions.submit({ ...(typeof where === 'string' ? { environment: where } : where), command, ...submit });
    await writeOut(`${record.id}\n`);
    process.stderr.write(followLine(record.id));
    return 0;
  }
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
    // In raw mode Ctrl-C is a byte for the command. Otherwise the first one cancels unless a second one follows
    // soon: that one detaches, leaving the command running (exiting stops only the following).
    let pending: NodeJS.Timeout | undefined;
    const onInterrupt = () => {
      if (!id) process.exit(130);
      if (pending) {
        clearTimeout(pending);
        process.stderr.write(`berth: detached; ${followLine(id)}`);
        process.exit(0);
      }
      process.stderr.write('berth: cancelling (Ctrl-C again at once to detach and leave it running)\n');
      const running = id;
      pending = setTimeout(() => void berth.executions.cancel(running).catch((e: unknown) => process.stderr.write(`berth: ${(e as Error).message}\n`)), DETACH_WINDOW_MS);
    };
    process.on('SIGINT', onInterrupt);
    undo.push(() => process.off('SIGINT', onInterrupt));
  }

  try {
    const record = await berth.executions.run(where, command, {
      ...submit,
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

const followLine = (id: string) => `${id} keeps running; follow it with: berth logs -f ${id}\n`;

const writeOut = (text: string) => new Promise<void>((resolve, reject) => process.stdout.write(text, (e) => (e ? reject(e) : resolve())));

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
