/**
 * A real `berth serve` child for the benchmarks that measure what a client of the server sees: its own process, its
 * own event loop, talked to over loopback TCP as any client would. Resolves once /healthz answers, with the time
 * from spawn to that answer.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const berthBin = join(dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'berth.js');

export interface BerthServe {
  url: string;
  child: ChildProcess;
  /** Spawn to the first answer of /healthz, in ms. */
  startMs: number;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** This process's environment without the allocator tuning of the measuring processes (bench/run.ts): Berth's own
 * child processes run as installed. */
export function installedEnv(): NodeJS.ProcessEnv {
  const { GLIBC_TUNABLES: _measuring, ...env } = process.env;
  return env;
}

/** `berth serve` on `dataDir` with `token` as the admin token, the native provider only, errors alone logged. */
export async function startBerthServe(dataDir: string, token: string): Promise<BerthServe> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const env = Object.fromEntries(Object.entries(installedEnv()).filter(([k]) => !k.startsWith('BERTH_')));
  const began = performance.now();
  const child = spawn(process.execPath, [berthBin, 'serve', '--data-dir', dataDir, '--port', String(port)], {
    env: { ...env, BERTH_TOKEN: token, BERTH_LOG_LEVEL: 'error', BERTH_DOCKER: '0' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = once(child, 'exit');
  let gone = false;
  void exited.then(() => (gone = true));
  for (;;) {
    if (gone) throw new Error(`berth serve exited before /healthz answered: ${stderr.slice(-2000)}`);
    const ok = await fetch(`${url}/healthz`, { headers: { authorization: `Bearer ${token}` } }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  const startMs = performance.now() - began;
  return {
    url,
    child,
    startMs,
    async stop() {
      if (gone) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 300_000);
      const [code] = await exited;
      clearTimeout(timer);
      if (code !== 0) throw new Error(`berth serve stopped with ${code}: ${stderr.slice(-2000)}`);
    },
  };
}
