/**
 * Shared by the Environment tests and the allocation crash fixture: starts a real Berth (SQLite, native provider,
 * the test engine's DockerProvider labelled with the test run) on a data directory, and counts what the Docker
 * engine holds for a label, looking behind Berth's back.
 */
import type { DockerProviderOptions } from '../../src/providers/docker/docker-provider.ts';
import { DockerProvider } from '../../src/providers/docker/docker-provider.ts';
import { poolContentDir } from '../../src/providers/docker/pool-content.ts';
import { NativeProvider } from '../../src/providers/native/native-provider.ts';
import type { Provider } from '../../src/providers/provider.ts';
import { startBerth, type Berth } from '../../src/runtime/berth.ts';
import type { Caller } from '../../src/runtime/runtime-api.ts';
import { dockerEndpoint, rawDocker } from './docker-env.ts';

export const admin: Caller = { scope: 'default', role: 'admin' };

export interface TestBerthOptions {
  /** Docker provider options (the test run's labels), or false for a runtime without Docker. */
  docker?: DockerProviderOptions | false;
  maintenanceMs?: number;
  runtimeId?: string;
}

export function testProviders(dataDir: string, docker: DockerProviderOptions | false = {}): Provider[] {
  const providers: Provider[] = [new NativeProvider({ dataDir })];
  if (docker !== false) providers.push(new DockerProvider({ endpoint: dockerEndpoint, contentDir: poolContentDir(dataDir), ...docker }));
  return providers;
}

export function startTestBerth(dataDir: string, opts: TestBerthOptions = {}): Promise<Berth> {
  return startBerth({
    settings: { dataDir, store: 'sqlite', maintenanceMs: opts.maintenanceMs ?? 60_000 },
    runtimeId: opts.runtimeId ?? 'rt_environments_test',
    providers: testProviders(dataDir, opts.docker),
  });
}

export interface EngineCount {
  containers: number;
  networks: number;
  volumes: number;
}

/** What the engine holds carrying `key=value`, whatever its state (`docker ps -a --filter label=…`). */
export async function countLabelled(key: string, value: string): Promise<EngineCount> {
  const filters = { label: [`${key}=${value}`] };
  const [containers, networks, volumes] = await Promise.all([
    rawDocker.listContainers({ all: true, filters }),
    rawDocker.listNetworks({ filters }),
    rawDocker.listVolumes({ filters }),
  ]);
  return { containers: containers.length, networks: networks.length, volumes: (volumes.Volumes ?? []).length };
}
