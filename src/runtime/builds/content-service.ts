/**
 * The Environments content chapter for callers (seed 001 §2–5): files and imports (src/content does the work, every
 * path confined), builds (one event on the environment; the build actor runs it), versions and activation, the
 * content fields of the environment object, the version an execution reads, harnesses, and the content side of
 * startup and deletion. Every call first checks the environment is in the caller's scope (environment_not_found).
 */
import path from 'node:path';
import { BerthError, isBerthError } from '../../../schemas/errors.ts';
import type { ActorRuntime } from '../../actors/actor-runtime.ts';
import { EnvironmentContent } from '../../content/environment-content.ts';
import type { Body } from '../../content/import/byte-reader.ts';
import type { ImportResult } from '../../content/import/import-result.ts';
import { hasEntries, readdirOrEmpty, recoverContent } from '../../content/content-layout.ts';
import { removeTree } from '../../content/remove-tree.ts';
import { buildStatus, type BuildContext } from '../../machines/build.machine.ts';
import type { EnvironmentContext, VersionSummary } from '../../machines/environment.machine.ts';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import type {
  BuildRecord,
  ContentApi,
  FileBytes,
  FileTree,
  HarnessInput,
  HarnessView,
  VersionEntry,
  VersionList,
} from './content-api.ts';
import { buildIdOf, type ContentRuntime } from './content-runtime.ts';
import { ContentSummaries } from './content-summaries.ts';
import type { EnvironmentContentFields } from '../environments/environment-view.ts';
import type { EnvironmentService } from '../environments/environment-service.ts';
import type { HarnessService } from './harness-service.ts';
import type { Caller } from '../runtime-api.ts';
import type { ReadModel } from '../../projections/read-model.ts';
import { assertQuota, isMember, type RolePolicy } from '../role-policy.ts';
import { ScopeTally } from '../scope-tally.ts';
import type { Listing, PageQuery } from '../listing.ts';

export interface ContentServiceDeps {
  actors: ActorRuntime<any>;
  environments: EnvironmentService;
  harnesses: HarnessService;
  runtime: ContentRuntime;
  artifacts: ArtifactStore;
  /**
   * Throws storage_full when the caller may not write now (a member under the data directory's reserve), or may not
   * write `upcomingBytes` more.
   */
  storageRoom(caller: Caller, upcomingBytes?: number): Promise<void>;
  /** The catalog read model: which environments of a scope are building (the concurrent builds quota). */
  catalog: ReadModel;
  policy: RolePolicy;
  now: () => number;
}

const seconds = (ms: number | null): number | null => (ms === null ? null : Math.floor(ms / 1000));

/** What the content fields of an environment object are made from (a catalog entry is one). */
export type DescribedEnvironment = Pick<EnvironmentContext, 'id' | 'versions' | 'latestVersion' | 'building' | 'activeVersion'>;

export class ContentService implements ContentApi {
  /** Files and packages of the environment object, kept until this service changes the content. */
  private readonly summaries: ContentSummaries;
  /** Members' build starts, one after another (see startBuild). */
  private starting: Promise<unknown> = Promise.resolve();
  /** Imports running, by member scope. */
  private readonly imports = new ScopeTally();

  constructor(private readonly deps: ContentServiceDeps) {
    this.summaries = new ContentSummaries({
      files: async (id) => (await EnvironmentContent.of(deps.runtime.dataDir, id).source.tree()).files,
      packages: async (id, version) => {
        const build = await this.build(buildIdOf(id, version));
        return build?.state === 'ready' ? build.context.packages : undefined;
      },
    });
  }

  // ------------------------------------------------------------------------------------------------ files, import

  async tree(caller: Caller, id: string): Promise<FileTree> {
    return (await this.content(caller, id)).source.tree();
  }

  async readFile(caller: Caller, id: string, path: string): Promise<FileBytes> {
    return (await this.content(caller, id)).source.read(path);
  }

  async writeFile(caller: Caller, id: string, path: string, body: Body, declaredBytes?: number) {
    return this.changing(id, async () => (await this.content(caller, id)).source.write(path, body, declaredBytes === undefined ? {} : { declaredBytes }));
  }

  async makeDirectory(caller: Caller, id: string, path: string) {
    return this.changing(id, async () => (await this.content(caller, id)).source.mkdir(path));
  }

  async removePath(caller: Caller, id: string, path: string) {
    return this.changing(id, async () => (await this.content(caller, id)).source.remove(path));
  }

  async importArchive(caller: Caller, id: string, body: Body, options: { replace?: boolean }): Promise<ImportResult> {
    const content = await this.content(caller, id);
    return this.importing(caller, () => this.changing(id, () => content.importArchive(body, { replace: options.replace ?? false })));
  }

  async importGit(caller: Caller, id: string, source: { url: string; ref?: string }, options: { replace?: boolean }): Promise<ImportResult> {
    const content = await this.content(caller, id);
    const { gitAllowLocal, gitAllowHosts } = this.deps.runtime.settings;
    return this.importing(caller, () =>
      this.changing(id, () => content.importGit(source, { replace: options.replace ?? false, allowLocal: gitAllowLocal, allowHosts: gitAllowHosts })),
    );
  }

  /**
   * Runs an import holding one of its member scope's places (concurrent_imports): each is a git process on this host
   * for as long as its remote takes, or an upload staged as it comes. Counted in this process.
   */
  private async importing<T>(caller: Caller, run: () => Promise<T>): Promise<T> {
    if (!isMember(caller)) return run();
    assertQuota(caller, 'concurrent_imports', this.deps.policy.quotas.concurrentImports, this.imports.of(caller.scope));
    this.imports.take(caller.scope);
    try {
      return await run();
    } finally {
      this.imports.give(caller.scope);
    }
  }

  // -------------------------------------------------------------------------------------------- builds, versions

  /**
   * Starts the next version's build and answers at once; one build at a time (environment_busy), and a member's scope
   * at most its quota of builds at once (concurrent_builds): members' starts are serialised, each counting the builds
   * the catalog shows once it shows the one before.
   */
  async startBuild(caller: Caller, id: string): Promise<BuildRecord> {
    if (!isMember(caller)) return this.requestBuild(caller, id);
    const run = this.starting.then(async () => {
      await this.deps.environments.context(caller, id); // another scope's or no environment: not_found first
      assertQuota(caller, 'concurrent_builds', this.deps.policy.quotas.concurrentBuilds, this.deps.catalog.query.building(caller.scope) as number);
      return this.requestBuild(caller, id);
    });
    this.starting = run.catch(() => undefined);
    return run;
  }

  private async requestBuild(caller: Caller, id: string): Promise<BuildRecord> {
    for (let attempt = 0; ; attempt++) {
      const ctx = await this.deps.environments.context(caller, id);
      const version = ctx.latestVersion + 1;
      try {
        const sent = await this.deps.actors.send('environment', id, { type: 'environment.build_requested', version, at: this.deps.now() });
        await this.deps.catalog.waitFor(sent.position, 10_000);
        return this.getBuild(caller, id, version);
      } catch (e) {
        // Another build was requested between the read and the send: decide again on what it left.
        if (!isBerthError(e, 'invalid_state') || attempt >= 3) throw e;
      }
    }
  }

  async getBuild(caller: Caller, id: string, version: number): Promise<BuildRecord> {
    const ctx = await this.deps.environments.context(caller, id);
    const summary = ctx.versions.find((v) => v.version === version);
    if (!summary) throw new BerthError('not_found', 'The environment has no such build.', { environmentId: id, version });
    const buildId = buildIdOf(id, version);
    const build = await this.build(buildId);
    // Building until the environment has heard the outcome: a build the build actor finished but the environment has
    // not yet recorded (nor activated) would otherwise read as ready and not active.
    const status: BuildRecord['status'] = build && summary.status !== 'building' ? buildStatus({ value: build.state }) : summary.status;
    const c = build?.context;
    return {
      object: 'build',
      environment: id,
      version,
      status,
      started_at: seconds(c?.startedAt ?? summary.startedAt)!,
      finished_at: seconds(c?.finishedAt ?? summary.finishedAt),
      error: c?.error ?? summary.error,
      log: await this.logOf(buildId, c),
      packages: c?.packages ?? [],
      size: c?.sizeBytes ?? summary.sizeBytes,
      active: ctx.activeVersion === version,
    };
  }

  async versions(caller: Caller, id: string): Promise<VersionList> {
    return versionList(id, await this.deps.environments.context(caller, id));
  }

  /** Makes a finished build the active one (a rollback: nothing is rebuilt). */
  async activate(caller: Caller, id: string, version: number): Promise<VersionList> {
    await this.deps.environments.context(caller, id);
    const sent = await this.deps.actors.send<EnvironmentContext>('environment', id, { type: 'environment.version_activated', version, at: this.deps.now() });
    return versionList(id, sent.context);
  }

  // ------------------------------------------------------------------------------------------- environment object

  /**
   * The content fields of each environment object (seed 001 §2), in order: from its versions as the catalog keeps
   * them and the kept file and package summaries (one await for a whole listing).
   */
  async describe(environments: readonly DescribedEnvironment[]): Promise<EnvironmentContentFields[]> {
    const [files, packages] = await Promise.all([
      this.summaries.filesOf(environments.map((e) => e.id)),
      this.summaries.packagesOf(environments),
    ]);
    return environments.map((e, i) => {
      const last = e.versions.at(-1);
      return {
        status: e.activeVersion !== null ? 'ready' : e.building !== null ? 'building' : last?.status === 'failed' ? 'failed' : 'empty',
        version: e.activeVersion,
        latestVersion: e.latestVersion || null,
        files: files[i],
        packages: packages[i],
        versions: e.versions.map((v) => versionEntry(v, e.activeVersion)),
        build: last ? { version: last.version, status: last.status, started_at: seconds(last.startedAt)!, finished_at: seconds(last.finishedAt), error: last.error } : null,
      };
    });
  }

  /**
   * The version an execution in this environment reads: the active one; none for an environment without content;
   * environment_not_ready for one that has source files or builds but no active version (refused before it starts).
   */
  async versionForExecution(ctx: EnvironmentContext): Promise<number | undefined> {
    if (ctx.activeVersion !== null) return ctx.activeVersion;
    if (ctx.latestVersion === 0 && !hasEntries(EnvironmentContent.of(this.deps.runtime.dataDir, ctx.id).layout.source)) return undefined;
    throw new BerthError('environment_not_ready', 'The environment has content but no active version: build it first.', {
      environmentId: ctx.id,
      building: ctx.building,
      latestVersion: ctx.latestVersion || null,
    });
  }

  // ------------------------------------------------------------------------------------------------- harnesses

  createHarness(caller: Caller, input: HarnessInput & { name: string }): Promise<HarnessView> {
    return this.deps.harnesses.create(caller, input);
  }
  listHarnesses(caller: Caller, page?: PageQuery): Promise<Listing<HarnessView>> {
    return this.deps.harnesses.list(caller, page);
  }
  getHarness(caller: Caller, id: string): Promise<HarnessView> {
    return this.deps.harnesses.get(caller, id);
  }
  updateHarness(caller: Caller, id: string, patch: HarnessInput): Promise<HarnessView> {
    return this.deps.harnesses.update(caller, id, patch);
  }
  deleteHarness(caller: Caller, id: string): Promise<void> {
    return this.deps.harnesses.delete(caller, id);
  }
  environmentHarnesses(caller: Caller, environmentId: string, page?: PageQuery): Promise<Listing<HarnessView>> {
    return this.deps.harnesses.naming(caller, environmentId, page);
  }
  /** The environment a task of this harness reads (environment_not_found once it is deleted). */
  harnessEnvironment(caller: Caller, harnessId: string): Promise<string> {
    return this.deps.harnesses.environmentOf(caller, harnessId);
  }

  // ---------------------------------------------------------------------------------------- startup, deletion

  /** After a delete: every file and version goes (a crash before this is finished by `recover`). */
  async removeContent(id: string): Promise<void> {
    try {
      await EnvironmentContent.of(this.deps.runtime.dataDir, id).removeAll();
    } finally {
      this.summaries.forget(id);
    }
  }

  /**
   * At startup, after actor recovery and before admitting work: the content of deleted environments is removed, each
   * live one is brought back to a whole state (content-layout.ts), and version directories that are not a ready
   * build (interrupted or failed ones) are removed. What cannot be removed or read (a tree past PATH_MAX that even
   * removeTree cannot take apart, a mount point, a file the server's user may not delete) is logged, one line per
   * environment and step, and left: leftovers cost disk, a server that does not start costs everyone.
   */
  async recover(): Promise<void> {
    const environments = path.join(this.deps.runtime.dataDir, 'environments');
    let ids: string[] = [];
    try {
      ids = await readdirOrEmpty(environments);
    } catch (e) {
      this.leftBehind('*', 'list_environments', e);
    }
    for (const id of ids) {
      try {
        await this.recoverOne(id);
      } catch (e) {
        this.leftBehind(id, 'recover', e);
      }
    }
  }

  private async recoverOne(id: string): Promise<void> {
    const view = /^henv_[0-9a-f]{32}$/.test(id) ? await this.deps.actors.get<EnvironmentContext>('environment', id) : undefined;
    const content = EnvironmentContent.of(this.deps.runtime.dataDir, id);
    if (!view || view.state === 'deleted') {
      await content.removeAll().catch((e: unknown) => this.leftBehind(id, 'remove_deleted', e));
      this.summaries.forget(id);
      return;
    }
    await this.changing(id, () => recoverContent(content.layout, (step, e) => this.leftBehind(id, step, e)));
    for (const name of await readdirOrEmpty(content.layout.versions)) {
      const version = Number(name);
      const kept = view.context.versions.some((v) => v.version === version && v.status === 'ready');
      if (kept || (await this.build(buildIdOf(id, version)))?.state === 'ready') continue;
      await removeTree(content.versionDir(version)).catch((e: unknown) => this.leftBehind(id, 'remove_unfinished_version', e));
    }
  }

  private leftBehind(environmentId: string, step: string, error: unknown): void {
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown';
    this.deps.runtime.logger?.warn({ environmentId, step, code, err: error }, 'content cleanup left what it could not remove or read');
  }

  // ---------------------------------------------------------------------------------------------------- helpers

  private async content(caller: Caller, id: string): Promise<EnvironmentContent> {
    await this.deps.environments.context(caller, id);
    return EnvironmentContent.of(this.deps.runtime.dataDir, id, { maxFileBytes: this.deps.runtime.settings.maxFileBytes }, (upcomingBytes) => this.deps.storageRoom(caller, upcomingBytes));
  }

  /** Runs a change to the source of `id`; its file summary is dropped once the change is done (or failed). */
  private async changing<T>(id: string, change: () => Promise<T>): Promise<T> {
    try {
      return await change();
    } finally {
      this.summaries.changed(id);
    }
  }

  private build(buildId: string) {
    return this.deps.runtime.build(buildId);
  }

  private async logOf(buildId: string, c: BuildContext | undefined): Promise<string> {
    if (!c?.log) return this.deps.runtime.running.get(buildId)?.log.toString() ?? '';
    if (c.log.size === 0) return '';
    const chunks: Buffer[] = [];
    for await (const chunk of this.deps.artifacts.read(c.log, 0, c.log.size)) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }
}

function versionEntry(v: VersionSummary, active: number | null): VersionEntry {
  return {
    version: v.version,
    status: v.status,
    started_at: seconds(v.startedAt)!,
    finished_at: seconds(v.finishedAt),
    packages: v.packages,
    size: v.sizeBytes,
    error: v.error,
    active: v.version === active,
  };
}

const versionList = (id: string, ctx: EnvironmentContext): VersionList => ({
  environment: id,
  active: ctx.activeVersion,
  latest: ctx.latestVersion || null,
  versions: ctx.versions.map((v) => versionEntry(v, ctx.activeVersion)),
});

