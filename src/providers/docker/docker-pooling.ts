/**
 * Warm pools on Docker (Provider.pooling): a pooled container serves an environment whose profile differs from the
 * pool's only in what the engine updates in place on a running container (memory, CPU, pids); image, network, HOME
 * and workspace sizes are fixed at create. Personalizing first checks the container still runs as recorded. Its
 * content version is shown through the content volume it was made with (pool-content.ts), filled once claimed.
 */
import type Docker from 'dockerode';
import { DEFAULT_HOME_MB, DEFAULT_WORKSPACE_MB, type Profile } from '../../../schemas/profile.ts';
import { BerthError } from '../../../schemas/errors.ts';
import type { PoolingCapability } from '../provider.ts';
import { identityOf, isServing } from './container-identity.ts';
import { hardenedHostConfig } from './container-spec.ts';
import { engineStatus } from './docker-client.ts';
import { resourceNames } from './labels.ts';
import { contentVolumePath, fillContent } from './pool-content.ts';

/** What only a new container could change, with the defaults a container is made with. */
const fixedAtCreate = (p: Profile, defaultImage: string) => ({
  image: p.image ?? defaultImage,
  network: p.network === 'none' ? 'none' : 'bridge',
  homeMb: p.homeMb ?? DEFAULT_HOME_MB,
  workspaceMb: p.workspaceMb ?? DEFAULT_WORKSPACE_MB,
});

/** The limits the engine updates in place, as the container's hardening sets them at create. */
const updatableLimits = (p: Profile) => {
  const host = hardenedHostConfig(p, '', []);
  // NanoCpus 0 lifts a limit the pool's profile had and the environment's has not.
  return { Memory: host.Memory, MemorySwap: host.MemorySwap, NanoCpus: host.NanoCpus ?? 0, PidsLimit: host.PidsLimit };
};

export function dockerPooling(docker: Docker, defaultImage: string, contentDir?: string): PoolingCapability {
  return {
    fits(pool, wanted) {
      if (pool.provider !== wanted.provider) return false;
      const [a, b] = [fixedAtCreate(pool, defaultImage), fixedAtCreate(wanted, defaultImage)];
      return a.image === b.image && a.network === b.network && a.homeMb === b.homeMb && a.workspaceMb === b.workspaceMb;
    },
    async personalize(ref, wanted, withContent) {
      const id = ref.identity?.resourceId;
      if (!id) return 'gone';
      const container = docker.getContainer(id);
      let info: Docker.ContainerInspectInfo;
      try {
        info = await container.inspect();
      } catch (error) {
        if (engineStatus(error) === 404) return 'gone';
        throw error;
      }
      if (!isServing(info) || identityOf(info).incarnation !== ref.identity?.incarnation) return 'gone';
      if (withContent && !(await contentVolumePath(docker, resourceNames(ref.requestId), ref, contentDir))) return 'cold';
      // Compared with what the container has now: an earlier claim that was given back may have changed them.
      const to = updatableLimits(wanted);
      const h = info.HostConfig;
      const now = { Memory: h.Memory, MemorySwap: h.MemorySwap, NanoCpus: h.NanoCpus ?? 0, PidsLimit: h.PidsLimit };
      if (JSON.stringify(now) !== JSON.stringify(to)) await container.update(to);
      return 'ready';
    },
    async applyContent(ref, version) {
      const root = await contentVolumePath(docker, resourceNames(ref.requestId), ref, contentDir);
      if (!root) throw new BerthError('unavailable', 'The pooled container has no content volume this host can fill.', { allocationId: ref.allocationId });
      await fillContent(root, version);
    },
  };
}
