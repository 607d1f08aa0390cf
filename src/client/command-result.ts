/**
 * What a sandbox command answers: its output captured within a bound (the last `maxOutputBytes` of each stream),
 * its exit code and its record; `CommandExitError` when it did not exit 0 (thrown unless the caller asks otherwise).
 */
import type { ExecutionRecordJson } from '../../schemas/api.ts';

export interface CommandResult {
  stdout: string;
  stderr: string;
  /** The exit code; null when a signal ended the command or it never ran (see `status`, `signal`, `timedOut`). */
  exitCode: number | null;
  signal: string | null;
  status: ExecutionRecordJson['status'];
  timedOut: boolean;
  /** More output came than was kept: `stdout`/`stderr` hold its end. */
  truncated: boolean;
  executionId: string;
  record: ExecutionRecordJson;
}

/** A command that did not exit 0: it carries the whole result (`exitCode`, `stdout`, `stderr`, …). */
export class CommandExitError extends Error implements CommandResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly status: ExecutionRecordJson['status'];
  readonly timedOut: boolean;
  readonly truncated: boolean;
  readonly executionId: string;
  readonly record: ExecutionRecordJson;

  constructor(result: CommandResult) {
    const how = result.timedOut ? 'timed out' : result.exitCode !== null ? `exited with ${result.exitCode}` : result.signal ? `was killed by ${result.signal}` : `ended ${result.status}`;
    const failure = result.record.failure ? `: ${result.record.failure.message}` : '';
    super(`command ${how}${failure}${result.stderr ? `\n${result.stderr.slice(-2000)}` : ''}`);
    this.name = 'CommandExitError';
    ({ stdout: this.stdout, stderr: this.stderr, exitCode: this.exitCode, signal: this.signal, status: this.status } = result);
    ({ timedOut: this.timedOut, truncated: this.truncated, executionId: this.executionId, record: this.record } = result);
  }
}

export const isCommandExitError = (e: unknown): e is CommandExitError => e instanceof CommandExitError;

/** The last `limit` bytes of a stream: enough for an agent to read an error, bounded whatever the command prints. */
export class TailCapture {
  private chunks: Buffer[] = [];
  private held = 0;
  dropped = false;

  constructor(private readonly limit: number) {}

  push(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.held += chunk.length;
    while (this.held > this.limit && this.chunks.length > 0) {
      const excess = this.held - this.limit;
      const first = this.chunks[0]!;
      this.dropped = true;
      if (first.length <= excess) {
        this.chunks.shift();
        this.held -= first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.held -= excess;
      }
    }
  }

  text(): string {
    return Buffer.concat(this.chunks).toString('utf8');
  }
}

export function resultOf(record: ExecutionRecordJson, stdout: TailCapture, stderr: TailCapture): CommandResult {
  return {
    stdout: stdout.text(),
    stderr: stderr.text(),
    exitCode: record.exitCode ?? null,
    signal: record.signal ?? null,
    status: record.status,
    timedOut: record.timedOut === true,
    truncated: stdout.dropped || stderr.dropped,
    executionId: record.id,
    record,
  };
}
