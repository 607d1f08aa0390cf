/**
 * `berth env …` on a running server through the typed client, in the scope of the token (the connection and a server
 * that stops answering are remote.ts's).
 */
import { PAGE_LIMIT_MAX } from '../../schemas/api.ts';
import type { Berth } from '../client/berth-client.ts';
import type { EnvironmentCommands } from './environment-commands.ts';

export function remoteEnvironmentCommands(berth: Berth, url: string): EnvironmentCommands {
  const environments = berth.environments;
  return {
    contentUnavailable: berth.capabilities.environments ? undefined : `The server at ${url} does not implement environment content.`,
    create: environments.create,
    page: (cursor?: string) => environments.page({ cursor, limit: PAGE_LIMIT_MAX }),
    // The server resolves a name wherever an id is: its environment answers with the id.
    resolve: async (ref) => (await environments.get(ref)).id,
    get: environments.get,
    remove: environments.delete,
    acquire: environments.acquire,
    release: environments.release,
    importArchive: (id, tar, replace) => environments.importArchive(id, tar, { replace }),
    startBuild: environments.build,
    getBuild: environments.getBuild,
    versions: environments.versions,
    activate: environments.activate,
    close: async () => undefined,
  };
}
