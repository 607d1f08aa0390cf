/**
 * `berth env …` on a running server (--url / BERTH_URL, --token / BERTH_TOKEN) through the typed client, in the
 * scope of the token. A server that stops answering becomes one clear sentence (remote.ts).
 */
import { PAGE_LIMIT_MAX } from '../../schemas/api.ts';
import type { EnvironmentCommands } from './environment-commands.ts';
import { connectRemote, isUnreachable, serverUrl, unreachable } from './remote.ts';

export async function openRemote(values: { url?: string; token?: string }): Promise<EnvironmentCommands> {
  const url = serverUrl(values.url);
  const berth = await connectRemote(values);
  const reached =
    <A extends unknown[], T>(call: (...args: A) => Promise<T>) =>
    async (...args: A): Promise<T> => {
      try {
        return await call(...args);
      } catch (error) {
        throw isUnreachable(error) ? unreachable(url, error) : error;
      }
    };
  const environments = berth.environments;
  return {
    contentUnavailable: berth.capabilities.environments ? undefined : `The server at ${url} does not implement environment content.`,
    create: reached(environments.create),
    page: reached((cursor?: string) => environments.page({ cursor, limit: PAGE_LIMIT_MAX })),
    get: reached(environments.get),
    remove: reached(environments.delete),
    acquire: reached(environments.acquire),
    release: reached(environments.release),
    importArchive: reached((id, tar, replace) => environments.importArchive(id, tar, { replace })),
    startBuild: reached(environments.build),
    getBuild: reached(environments.getBuild),
    versions: reached(environments.versions),
    activate: reached(environments.activate),
    close: async () => undefined,
  };
}
