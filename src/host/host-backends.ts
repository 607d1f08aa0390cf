/**
 * The providers a `berth host` runs remote profiles with, by the backend a profile names: its native provider always
 * (commands on this machine, contained for members), and with `--docker` the Docker provider on this machine's own
 * engine (DOCKER_HOST as the docker CLI reads it), with the hardening it applies anywhere. Both keep their spools
 * and receipts under the host's data directory or in their volumes, so a restarted host serves them again.
 */
import { engineFiles } from '../providers/docker/docker-client.ts';
import { DockerProvider, type DockerProviderOptions } from '../providers/docker/docker-provider.ts';
import { poolContentDir } from '../providers/docker/pool-content.ts';
import { NativeProvider } from '../providers/native/native-provider.ts';
import type { Provider } from '../providers/provider.ts';
import type { HostBackend } from '../providers/remote/hosted.ts';

export interface HostBackendOptions {
  dataDir: string;
  /** Host paths a contained command must never see besides the data directory (the credential file). */
  hidden: string[];
  /** Serve the `docker` backend too: true for the engine DOCKER_HOST names, or the provider's own options. */
  docker?: boolean | DockerProviderOptions;
  log: (message: string) => void;
}

export interface HostBackends {
  providers: Partial<Record<HostBackend, Provider>>;
  close(): Promise<void>;
}

export async function hostBackends(options: HostBackendOptions): Promise<HostBackends> {
  const providers: Partial<Record<HostBackend, Provider>> = {
    // The engine it serves (root on this machine) is out of its contained commands' sight like its credential.
    native: new NativeProvider({ dataDir: options.dataDir, hidden: [...options.hidden, ...(options.docker ? engineFiles(process.env, options.docker === true ? undefined : options.docker.endpoint) : [])] }),
  };
  if (options.docker) {
    const docker = new DockerProvider({ contentDir: poolContentDir(options.dataDir), ...(options.docker === true ? {} : options.docker) });
    // Served all the same: an engine that starts later is used from then on; until then allocations are refused.
    if (!(await docker.available())) options.log('host: the Docker engine does not answer; docker allocations are refused until it does');
    providers.docker = docker;
  }
  return {
    providers,
    async close() {
      await Promise.all(Object.values(providers).map((p) => p.close?.()));
    },
  };
}
