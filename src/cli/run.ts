/**
 * `berth exec`/`berth run` when no server holds the data directory (exec.ts decides): runs one command in an
 * environment through a runtime in this process on the data directory (recovery first, as `serve` does), streams its
 * output live by cursor, and exits with the command's code. Ctrl-C cancels the command; re-running with the same
 * --operation-id re-attaches to the first run instead of starting another.
 */
import { randomUUID } from 'node:crypto';
import type { Writable } from 'node:stream';
import { isBerthError } from '../../schemas/errors.ts';
import type { OutputStream } from '../../schemas/output.ts';
import { startBerth } from '../runtime/berth.ts';
import type { BerthApi } from '../runtime/berth-api.ts';
import { loadConfig } from '../runtime/config.ts';
import type { Caller, ExecutionRecord } from '../runtime/runtime-api.ts';
import { storeOptions } from './command-args.ts';
import { commandLineOptions, parseCommandLine } from './command-line.ts';
import { exitStatusOf } from './exit-status.ts';
import { createLogger } from './logger.ts';
import { runUsage } from './usage.ts';


/** The CLI acts as the data directory's administrator, in the scope the admin token maps to by default. */
const caller: Caller = { scope: 'default', role: 'admin' };

export async function runCommand(argv: string[]): Promise<number> {
  const line = parseCommandLine(argv, { ...storeOptions, ...commandLineOptions }, runUsage);
  if (line.help) return void console.log(runUsage), 0;
  const { values, command, env, timeoutMs } = line;

  const config = loadConfig({ dataDir: values['data-dir'], store: values.store });
  const berth = await startBerth({
    settings: config,
    runtimeId: config.runtimeId,
    logger: createLogger({ level: process.env.BERTH_LOG_LEVEL ?? 'warn' }),
  });
  try {
    const environment = await berth.api.resolveEnvironment(caller, line.environment);
    const tty = values.tty ?? false;
    const record = await berth.api.submitExecution(caller, {
      operationId: values['operation-id'] ?? `run-${randomUUID()}`,
      environment,
      command,
      ...(values.cwd !== undefined ? { cwd: values.cwd } : {}),
      ...(Object.keys(env).length > 0 ? { env } : {}),
      stdin: (values.interactive ?? false) || tty,
      ...(tty ? { pty: { cols: process.stdout.columns || 80, rows: process.stdout.rows || 24 } } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    });
    const detach = attachInput(berth.api, record.id, { stdin: (values.interactive ?? false) || tty, tty });
    try {
      return exitCodeOf(await follow(berth.api, record.id, tty ? ['pty'] : ['stdout', 'stderr']));
    } finally {
      detach();
    }
  } finally {
    await berth.stop();
  }
}

/** Copies every stream to this process until each one is saved, then answers the final record. */
async function follow(api: BerthApi, id: string, streams: OutputStream[]): Promise<ExecutionRecord> {
  const cursors = new Map<OutputStream, number>(streams.map((s) => [s, 0]));
  const complete = new Set<OutputStream>();
  while (complete.size < streams.length) {
    let progressed = false;
    for (const stream of streams) {
      if (complete.has(stream)) continue;
      const chunk = await api.readOutput(caller, id, stream, cursors.get(stream)!);
      if (chunk.data.length > 0) {
        await write(stream === 'stderr' ? process.stderr : process.stdout, chunk.data);
        progressed = true;
      }
      cursors.set(stream, chunk.next);
      if (chunk.complete) complete.add(stream);
    }
    if (!progressed && complete.size < streams.length) await api.waitForOutput(caller, id, 1_000);
  }
  return api.getExecution(caller, id);
}

const write = (out: Writable, data: Buffer) =>
  new Promise<void>((resolve, reject) => out.write(data, (e) => (e ? reject(e) : resolve())));

/** Forwards stdin (raw on a terminal, with resizes) and turns Ctrl-C into a cancel; returns the undo. */
function attachInput(api: BerthApi, id: string, o: { stdin: boolean; tty: boolean }): () => void {
  const undo: (() => void)[] = [];
  const report = (e: unknown) => {
    if (!isBerthError(e, 'invalid_state')) process.stderr.write(`berth: ${(e as Error).message}\n`);
  };
  if (o.stdin) {
    let queue = Promise.resolve();
    const onData = (bytes: Buffer) => (queue = queue.then(() => api.writeStdin(caller, id, bytes)).catch(report));
    const onEnd = () => (queue = queue.then(() => api.endStdin(caller, id)).catch(report));
    if (o.tty && process.stdin.isTTY) {
      process.stdin.setRawMode(true);
      undo.push(() => process.stdin.setRawMode(false));
    }
    process.stdin.on('data', onData).once('end', onEnd);
    undo.push(() => {
      process.stdin.off('data', onData).off('end', onEnd);
      process.stdin.pause();
    });
  }
  if (o.tty) {
    const onResize = () => void api.resize(caller, id, process.stdout.columns || 80, process.stdout.rows || 24).catch(report);
    process.on('SIGWINCH', onResize);
    undo.push(() => process.off('SIGWINCH', onResize));
  }
  let interrupts = 0;
  const onInterrupt = () => {
    if (++interrupts === 1) {
      process.stderr.write('berth: cancelling (Ctrl-C again to stop waiting for it)\n');
      void api.cancelExecution(caller, id).catch(report);
    } else process.exit(130);
  };
  process.on('SIGINT', onInterrupt);
  undo.push(() => process.off('SIGINT', onInterrupt));
  return () => undo.reverse().forEach((f) => f());
}

function exitCodeOf(record: ExecutionRecord): number {
  const { code, complaint } = exitStatusOf(record);
  if (complaint) process.stderr.write(`berth: ${complaint}\n`);
  return code;
}
