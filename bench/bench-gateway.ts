/**
 * The gateway benchmarks' test bed: the real runtime (startBerth on a temporary data directory, native provider) with
 * the gateway listening on loopback, an admin token, and the figure line every benchmark ends with.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildGateway } from '../src/gateway/app.ts';
import { createTokenAuth } from '../src/gateway/auth.ts';
import { listen } from '../src/gateway/listen.ts';
import { NativeProvider } from '../src/providers/native/native-provider.ts';
import { startBerth, type Berth } from '../src/runtime/berth.ts';
import type { Caller } from '../src/runtime/runtime-api.ts';

export const caller: Caller = { scope: 'default', role: 'admin' };
const token = 'bench-token-0123456789abcdef';

export interface BenchGateway {
  berth: Berth;
  url: string;
  headers: Record<string, string>;
  close(): Promise<void>;
}

export async function startBenchGateway(): Promise<BenchGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), 'berth-bench-gateway-'));
  const berth = await startBerth({
    settings: { dataDir, store: 'sqlite', maintenanceMs: 600_000 },
    runtimeId: 'rt_bench',
    providers: [new NativeProvider({ dataDir })],
  });
  const gateway = buildGateway({ api: berth.api, auth: createTokenAuth({ adminToken: token }) });
  const listener = await listen(gateway, { port: 0 });
  return {
    berth,
    url: listener.url,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    async close() {
      await listener.close();
      await gateway.close();
      await berth.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
