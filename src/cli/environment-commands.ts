/**
 * What `berth env …` asks of Berth: one port that the runtime in this process (env-in-process.ts) and a server over
 * HTTP (env-remote.ts) both implement, so the command table (env.ts) is written once. Shapes are the wire's.
 */
import type { Profile } from '../../schemas/profile.ts';
import type { Allocation, BuildRecord, Environment, ImportResult, VersionList } from '../client/berth-client.ts';
import type { Page } from '../client/pages.ts';

export interface EnvironmentCommands {
  /** Why the content commands (push, build, versions, activate) cannot run here; undefined when they can. */
  readonly contentUnavailable: string | undefined;
  create(input: { name: string; description?: string; profile: Partial<Profile> }): Promise<Environment>;
  /** One page of the caller's environments (the largest a server gives), from `cursor`. */
  page(cursor?: string): Promise<Page<Environment>>;
  /** The id an environment's id, name or slug names in the caller's scope (the runtime's resolver, in either form). */
  resolve(ref: string): Promise<string>;
  get(id: string): Promise<Environment>;
  remove(id: string): Promise<void>;
  acquire(id: string): Promise<Allocation>;
  release(id: string, allocationId: string): Promise<Allocation>;
  importArchive(id: string, tar: AsyncIterable<Uint8Array>, replace: boolean): Promise<ImportResult>;
  startBuild(id: string): Promise<BuildRecord>;
  getBuild(id: string, version: number): Promise<BuildRecord>;
  versions(id: string): Promise<VersionList>;
  activate(id: string, version: number): Promise<VersionList>;
  /** Ends the session (in this process: lets the builds it started finish, then stops the runtime). */
  close(): Promise<void>;
}
