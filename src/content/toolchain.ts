/**
 * The toolchain port a build runs its installers through: run one command in a directory with an environment and
 * stream its output. The caller provides it (natively on the host, inside bubblewrap, inside the environment's
 * container), so a build installs with the same toolchain sessions run with. `hostToolchain` is the plain host one.
 */
import { spawn } from 'node:child_process';

export interface ToolchainCommand {
  argv: string[];
  /** As the toolchain sees it (a container path when the runner is a container). */
  cwd: string;
  env: Record<string, string>;
  onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void;
  timeoutMs?: number;
}

export interface ToolchainExit {
  exitCode: number | null;
  signal?: string | null;
  /** Why the command never ran (not found, no permission), when it did not. */
  error?: string;
  timedOut?: boolean;
}

export type ToolchainRunner = (command: ToolchainCommand) => Promise<ToolchainExit>;

/** Runs on the host, in its own process group so a timeout kills everything the installer started. */
export const hostToolchain: ToolchainRunner = (command) =>
  new Promise((resolve) => {
    const [file, ...args] = command.argv;
    const child = spawn(file, args, { cwd: command.cwd, env: command.env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let timedOut = false;
    const timer =
      command.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            try {
              process.kill(-(child.pid as number), 'SIGKILL');
            } catch {
              // already gone
            }
          }, command.timeoutMs);
    child.stdout.on('data', (chunk: Buffer) => command.onOutput('stdout', chunk));
    child.stderr.on('data', (chunk: Buffer) => command.onOutput('stderr', chunk));
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ exitCode: null, error: e.message });
    });
    child.on('close', (exitCode, signal) => {
      clearTimeout(timer);
      resolve({ exitCode, signal, ...(timedOut ? { timedOut } : {}) });
    });
  });
