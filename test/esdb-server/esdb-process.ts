/**
 * Starts the test server (main.ts) as a child process and answers its store URL; `stop` ends it. A Berth server
 * killed with SIGKILL in a test finds its events there when it comes back.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export interface EsdbProcess {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

const main = join(import.meta.dirname, 'main.ts');

export async function spawnEsdbServer(): Promise<EsdbProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', main], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the test server did not start within 30 s; stderr: ${stderr}`)), 30_000);
    child.once('exit', (code) => reject(new Error(`the test server exited with ${code}; stderr: ${stderr}`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /^esdb test server listening on (\d+)$/.exec(line);
      if (!match) return;
      clearTimeout(timer);
      resolve(Number(match[1]));
    });
  });
  return {
    url: `esdb://localhost:${port}?tls=false`,
    pid: child.pid!,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await once(child, 'exit');
    },
  };
}
