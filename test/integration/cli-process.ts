/**
 * Runs the real `berth` command (node bin/berth.js) for the CLI integration tests: either to completion, or as a
 * long-running `serve` whose stdout lines can be awaited.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const root = join(dirname(fileURLToPath(import.meta.url)), '../..');
const bin = join(root, 'bin/berth.js');

/** An environment without any BERTH_* variable of the caller's, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('BERTH_')));
  return { ...env, ...extra };
}

export interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

export async function berth(args: string[], env = cleanEnv()): Promise<Finished> {
  const child = spawn(process.execPath, [bin, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = (await once(child, 'exit')) as [number | null];
  return { code, stdout, stderr };
}

/** Whether the child has ended (an exit code or a signal). */
export const hasExited = (child: ChildProcess): boolean => child.exitCode !== null || child.signalCode !== null;

export interface Running {
  child: ChildProcess;
  /** Every stdout line so far. */
  lines: string[];
  stderr: () => string;
  /** Resolves with the first stdout line matching `re` (already printed or to come). */
  waitForLine(re: RegExp, timeoutMs?: number): Promise<string>;
  /** Sends `signal` and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** `inherit`: descriptors the child gets past stderr (3, 4, …), as a parent that leaks them would hand them on. */
export function spawnBerth(args: string[], env = cleanEnv(), inherit: (number | 'pipe' | 'ignore')[] = []): Running {
  const child = spawn(process.execPath, [bin, ...args], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe', ...inherit] });
  const lines: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  const listeners = new Set<(line: string) => void>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    lines.push(line);
    for (const l of listeners) l(line);
  });
  return {
    child,
    lines,
    stderr: () => stderr,
    waitForLine(re, timeoutMs = 30_000) {
      const seen = lines.find((l) => re.test(l));
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => fail(new Error(`no line matching ${re} within ${timeoutMs} ms; stderr: ${stderr}`)), timeoutMs);
        const onLine = (line: string) => {
          if (!re.test(line)) return;
          listeners.delete(onLine);
          clearTimeout(timer);
          resolve(line);
        };
        const fail = (e: Error) => {
          listeners.delete(onLine);
          reject(e);
        };
        listeners.add(onLine);
        void exited.then((code) => fail(new Error(`berth exited (${code}) before printing ${re}; stderr: ${stderr}`)));
      });
    },
    async stop(signal = 'SIGTERM') {
      if (!hasExited(child)) child.kill(signal);
      return exited;
    },
  };
}
