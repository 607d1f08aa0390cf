/**
 * The few shapes of Docker exec the executor needs: start a process detached (the supervisor), run a short one to
 * its end (cancel), attach to stdin (the FIFO writer, a PTY), and ask whether an exec's process still runs.
 */
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { engineStatus } from './docker-client.ts';

export interface ExecOptions {
  cmd: string[];
  user: string;
  env?: Record<string, string>;
  /** The working directory (default: the container's). */
  cwd?: string;
  tty?: boolean;
}

const envList = (env: Record<string, string> = {}) => Object.entries(env).map(([k, v]) => `${k}=${v}`);

export function createExec(container: Docker.Container, o: ExecOptions, attach: { stdin?: boolean; output?: boolean }) {
  return container.exec({
    Cmd: o.cmd,
    User: o.user,
    Env: envList(o.env),
    ...(o.cwd !== undefined ? { WorkingDir: o.cwd } : {}),
    Tty: o.tty ?? false,
    AttachStdin: attach.stdin ?? false,
    AttachStdout: attach.output ?? false,
    AttachStderr: attach.output ?? false,
  });
}

/** Starts the exec and returns once the engine launched its process; nothing stays attached. */
export async function startDetached(exec: Docker.Exec): Promise<void> {
  const response = (await exec.start({ Detach: true })) as unknown;
  // The engine answers with an (empty) stream; drain it so the connection is freed.
  if (response && typeof (response as NodeJS.ReadableStream).resume === 'function') (response as NodeJS.ReadableStream).resume();
}

/** Starts the exec attached: writes go to its stdin, reads give its output (raw bytes with a TTY, else multiplexed). */
export async function startAttached(exec: Docker.Exec, tty: boolean): Promise<Duplex> {
  return (await exec.start({ hijack: true, stdin: true, Tty: tty })) as Duplex;
}

export interface ScriptResult {
  exitCode: number | null;
  stdout: Buffer;
  stderr: Buffer;
}

/** Runs a short command to its end, with `stdin` as its input if given, and returns its exit code and output. */
export async function runToEnd(container: Docker.Container, o: ExecOptions, stdin?: Buffer): Promise<ScriptResult> {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  const exitCode = await runStreaming(container, o, (stream, data) => (stream === 'stderr' ? err : out).push(data), stdin);
  return { exitCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err) };
}

/** Runs a command to its end, handing its output over as it comes; resolves with its exit code. */
export async function runStreaming(
  container: Docker.Container,
  o: ExecOptions,
  onOutput: (stream: 'stdout' | 'stderr', data: Buffer) => void,
  stdin?: Buffer,
): Promise<number | null> {
  const exec = await createExec(container, o, { output: true, stdin: stdin !== undefined });
  const stream = (await exec.start({ hijack: true, stdin: stdin !== undefined })) as Duplex;
  const ended = new Promise<void>((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
  });
  demux(stream, onOutput);
  if (stdin !== undefined) stream.end(stdin);
  await ended;
  return exitCodeOf(exec);
}

/**
 * Splits the engine's multiplexed stream (no TTY): frames of an 8-byte header (stream type, 3 zero bytes, big-endian
 * length) and the payload.
 */
function demux(stream: Duplex, onOutput: (stream: 'stdout' | 'stderr', data: Buffer) => void): void {
  let pending: Buffer = Buffer.alloc(0);
  stream.on('data', (chunk: Buffer) => {
    pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
    while (pending.length >= 8) {
      const length = pending.readUInt32BE(4);
      if (pending.length < 8 + length) break;
      onOutput(pending[0] === 2 ? 'stderr' : 'stdout', pending.subarray(8, 8 + length));
      pending = pending.subarray(8 + length);
    }
  });
}

/** Whether the exec's process still runs; false once it exited or the engine forgot it (container restarted). */
export async function execRunning(docker: Docker, execId: string): Promise<boolean> {
  try {
    return (await docker.getExec(execId).inspect()).Running;
  } catch (error) {
    if (engineStatus(error) === 404) return false;
    throw error;
  }
}

/** The engine may close an attached stream a moment before it records the exit code. */
export async function exitCodeOf(exec: Docker.Exec): Promise<number | null> {
  for (let i = 0; ; i++) {
    const info = await exec.inspect();
    if (!info.Running || i >= 100) return info.ExitCode;
    await new Promise((r) => setTimeout(r, 10));
  }
}
