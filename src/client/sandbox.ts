/**
 * A live sandbox (`berth.sandboxes.create()` / `connect()`): a lease's machine with a workspace, and one open tool
 * turn through which its commands run and its files are read and written. `run` answers `{stdout, stderr,
 * exitCode, …}` and throws CommandExitError unless the command exits 0; `spawn` starts one in the background;
 * `kill` ends the sandbox in one call. Every request is retried on transient faults with the same operation id or key.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutionRecordJson } from '../../schemas/api.ts';
import type { BerthCore, Lease, LeasePause, Turn } from './berth-core.ts';
import { isBerthApiError } from './berth-api-error.ts';
import { CommandExitError, resultOf, TailCapture, type CommandResult } from './command-result.ts';
import type { StdinSource } from './execution-follower.ts';
import { SandboxFiles } from './sandbox-files.ts';

/** The output `run` and `spawn` keep of each stream by default (the end of it). */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;

export interface CommandOptions {
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** Bytes for the command's stdin, sent then closed (`spawn` also takes 'pipe': write with `handle.sendStdin`). */
  stdin?: StdinSource;
  timeoutMs?: number;
  /** Where the command starts, relative to the workspace root. */
  cwd?: string;
  env?: Record<string, string>;
  /** false: answer a non-zero exit as a result instead of throwing CommandExitError. */
  throwOnError?: boolean;
  /** How much of each stream `stdout`/`stderr` keep (its end); default 1 MiB. */
  maxOutputBytes?: number;
  /** Aborting cancels the command. */
  signal?: AbortSignal;
}

export interface SpawnOptions extends Omit<CommandOptions, 'stdin'> {
  stdin?: StdinSource | 'pipe';
}

/** A command running in the background. */
export interface CommandHandle {
  readonly executionId: string;
  readonly operationId: string;
  /** Resolves when it ends (CommandExitError on a non-zero exit unless `throwOnError: false`). */
  wait(): Promise<CommandResult>;
  /** Cancels it (SIGTERM, then SIGKILL); `wait` then answers its end. */
  kill(): Promise<void>;
  /** With `stdin: 'pipe'`: sends bytes to its stdin. */
  sendStdin(data: string | Uint8Array): void;
  /** With `stdin: 'pipe'`: closes its stdin. */
  closeStdin(): void;
}

/** What a sandbox is made of, as `list()` and `info()` answer it. */
export interface SandboxInfo {
  /** The sandbox's id: its lease's id. */
  id: string;
  /** Its name: the lease's key (accepted wherever the id is). */
  name: string;
  state: Lease['state'];
  workspaceId: string | null;
  environmentId: string | null;
  /** When the server kills it (ms since the epoch: its timeout), or null. */
  deadline: number | null;
  createdAt: number;
}

export const sandboxInfo = (lease: Lease): SandboxInfo => ({
  id: lease.id,
  name: lease.key,
  state: lease.state,
  workspaceId: lease.workspaceId,
  environmentId: lease.environmentId,
  deadline: lease.deadline ?? null,
  createdAt: lease.createdAt,
});

/** The turn key of a sandbox: every client connected to it shares its one turn. */
export const sandboxTurnKey = (name: string) => `sandbox:${name}`;

export class Sandbox {
  readonly files: SandboxFiles;

  constructor(
    private readonly berth: BerthCore,
    private lease: Lease,
    readonly turn: Turn,
    /** The sandbox made its workspace: `kill` deletes it. */
    private readonly ownsWorkspace: boolean,
  ) {
    this.files = new SandboxFiles(berth.turns.files(turn.sessionId, turn.id), berth.retry, () => berth.events.follow('now'), turn.workspaceId);
  }

  get id(): string {
    return this.lease.id;
  }

  get name(): string {
    return this.lease.key;
  }

  get workspaceId(): string {
    return this.turn.workspaceId;
  }

  /** Runs a command to its end: `{stdout, stderr, exitCode, …}`, CommandExitError unless it exits 0. */
  async run(command: string | string[], options: CommandOptions = {}): Promise<CommandResult> {
    return (await this.spawn(command, options)).wait();
  }

  /** Starts a command and answers once the server accepted it; its output streams to the callbacks meanwhile. */
  async spawn(command: string | string[], options: SpawnOptions = {}): Promise<CommandHandle> {
    const operationId = randomUUID();
    const pipe = options.stdin === 'pipe' ? new StdinPipe() : undefined;
    const stdin = pipe ?? (options.stdin === 'pipe' ? undefined : options.stdin);
    const record = await this.berth.executions.submit(
      {
        operationId,
        lease: this.lease.key,
        turn: this.turn.id,
        command,
        cwd: options.cwd,
        env: options.env,
        timeoutMs: options.timeoutMs,
        stdin: stdin !== undefined,
      },
      options.signal,
    );
    const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
    const out = new TailCapture(limit);
    const err = new TailCapture(limit);
    const decodeOut = new TextDecoder();
    const decodeErr = new TextDecoder();
    const cancel = () => void this.berth.executions.cancel(record.id).catch(() => undefined);
    options.signal?.addEventListener('abort', cancel, { once: true });
    const ended: Promise<ExecutionRecordJson> = this.berth.executions
      .follow(record.id, {
        stdin,
        onStdout: (chunk) => (out.push(chunk), options.onStdout?.(decodeOut.decode(chunk, { stream: true }))),
        onStderr: (chunk) => (err.push(chunk), options.onStderr?.(decodeErr.decode(chunk, { stream: true }))),
      })
      .finally(() => options.signal?.removeEventListener('abort', cancel));
    // A caller that never waits must not see an unhandled rejection; `wait` still answers it.
    ended.catch(() => undefined);
    return {
      executionId: record.id,
      operationId,
      wait: async () => {
        const result = resultOf(await ended, out, err);
        if (result.exitCode !== 0 && options.throwOnError !== false) throw new CommandExitError(result);
        return result;
      },
      kill: async () => {
        await this.berth.retry(() => this.berth.executions.cancel(record.id));
      },
      sendStdin: (data) => requirePipe(pipe).push(typeof data === 'string' ? Buffer.from(data) : data),
      closeStdin: () => requirePipe(pipe).end(),
    };
  }

  /** The sandbox as the server holds it now. */
  async info(): Promise<SandboxInfo> {
    this.lease = await this.berth.retry(() => this.berth.leases.get(this.lease.key));
    return sandboxInfo(this.lease);
  }

  /** Pauses it: `retryAt` (ms since the epoch) resumes it; a pause longer than its idle interval frees the machine. */
  async pause(pause: LeasePause = { cause: { kind: 'paused_by_client' } }): Promise<SandboxInfo> {
    return sandboxInfo((this.lease = await this.berth.retry(() => this.berth.leases.pause(this.lease.key, pause))));
  }

  /**
   * The server kills the sandbox's machine `ms` from now (its lease released, the machine and its environment
   * removed) unless this is called again to move the deadline (null clears it). Recorded by the server, so it holds
   * with no client running and across a server restart; `kill()` still deletes the workspace the sandbox made.
   */
  async setTimeout(ms: number | null): Promise<SandboxInfo> {
    return sandboxInfo((this.lease = await this.berth.retry(() => this.berth.leases.setTimeout(this.lease.key, ms))));
  }

  async hold(): Promise<SandboxInfo> {
    return sandboxInfo((this.lease = await this.berth.retry(() => this.berth.leases.hold(this.lease.key))));
  }

  async resume(): Promise<SandboxInfo> {
    return sandboxInfo((this.lease = await this.berth.retry(() => this.berth.leases.resume(this.lease.key))));
  }

  /**
   * Ends the sandbox in one call: removes its machine (its running commands end) and the lease, releases its turn
   * and deletes the workspace it made. Killing a killed sandbox answers at once.
   */
  async kill(): Promise<void> {
    await this.berth.retry(() => this.berth.leases.release(this.lease.key)).catch(ignore('not_found'));
    // A workspace already deleted (a kill repeated) has no turn left to release.
    await this.berth.retry(() => this.berth.turns.release(this.turn.sessionId, this.turn.id)).catch(ignore('not_found', 'workspace_unavailable'));
    if (this.ownsWorkspace) {
      await this.berth.retry(() => this.berth.workspaces.delete(this.turn.workspaceId)).catch(ignore('not_found', 'workspace_unavailable'));
    }
  }
}

const ignore = (...codes: string[]) => (error: unknown) => {
  if (!codes.some((code) => isBerthApiError(error, code))) throw error;
};

const requirePipe = (pipe: StdinPipe | undefined): StdinPipe => {
  if (!pipe) throw new TypeError("sendStdin and closeStdin need spawn(…, { stdin: 'pipe' })");
  return pipe;
};

/** Stdin written by the caller as it goes: an async iterable the follower drains. */
class StdinPipe implements AsyncIterable<Uint8Array> {
  private readonly queue: Uint8Array[] = [];
  private ended = false;
  private wake: (() => void) | undefined;

  push(chunk: Uint8Array): void {
    if (this.ended) throw new TypeError('stdin is closed');
    this.queue.push(chunk);
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<Uint8Array> {
    for (;;) {
      const next = this.queue.shift();
      if (next) yield next;
      else if (this.ended) return;
      else await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }
}
