/**
 * The build actor type (seed 001 §4): `build.run` snapshots the source into the version, installs what its manifests
 * declare in the build toolchain (build-toolchain.ts), makes the version read-only and reports the outcome with the
 * installers' log (in the artifact store). A failed build's version directory is removed, and so is a stopped
 * one's (under the data directory's reserve: `storage_full`); an interrupted one (the runtime stopped) reports
 * nothing and is failed by the next epoch's recovery, which discards its directory (and, for a Docker build, its
 * container first).
 */
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { buildEvents, MAX_LISTED_PACKAGES } from '../../../schemas/events/build.ts';
import { BUILD_ERROR_MAX } from '../../../schemas/events/environment.ts';
import { isBerthError } from '../../../schemas/errors.ts';
import { defineActor, type DomainEvent } from '../../actors/actor-type.ts';
import { BuildLog } from '../../content/build-log.ts';
import { runBuild, type BuildResult } from '../../content/build-runner.ts';
import { EnvironmentContent } from '../../content/environment-content.ts';
import { withoutDir } from '../../content/hide-paths.ts';
import { removeTree } from '../../content/remove-tree.ts';
import { makeReadOnly } from '../../content/versions.ts';
import {
  buildMachine,
  finished,
  reject,
  type BuildDiscardParams,
  type BuildReportParams,
  type BuildRunParams,
} from '../../machines/build.machine.ts';
import type { ArtifactStore } from '../../store/artifact-store.ts';
import { buildToolchain } from './build-toolchain.ts';
import type { Services } from '../services.ts';

const clip = (text: string): string => (text.length > BUILD_ERROR_MAX ? `${text.slice(0, BUILD_ERROR_MAX - 1)}…` : text);

const putLog = (artifacts: ArtifactStore, text: string) => artifacts.putBytes(Buffer.from(text, 'utf8'));

export const buildActor = defineActor<typeof buildMachine, Services>({
  type: 'build',
  machine: buildMachine,
  input: (id) => ({ id }),
  events: buildEvents,
  finished,
  reject,
  effects: {
    'build.run': async (p: BuildRunParams, ctx): Promise<DomainEvent | undefined> => {
      const { content, artifacts, shutdown } = ctx.services;
      // Error and log are shown to the tenant: they never name the data directory (an fs error's message does).
      const hidden = (text: string) => (content ? withoutDir(text, content.dataDir, '<data>') : text);
      const failed = async (error: string, log?: string): Promise<DomainEvent> => ({
        type: 'build.failed',
        error: clip(hidden(error)),
        ...(log !== undefined ? { log: await putLog(artifacts, hidden(log)) } : {}),
        at: ctx.services.now(),
      });
      if (!content) return failed('the environments content chapter is switched off');
      const env = EnvironmentContent.of(content.dataDir, p.environmentId, { maxFileBytes: content.settings.maxFileBytes });
      const live = new BuildLog();
      const stop = new AbortController();
      content.running.set(p.buildId, { log: live, stop });
      const scratch = path.join(env.layout.staging, `build-${p.version}-${randomUUID()}`);
      try {
        let snapshot;
        try {
          snapshot = await env.snapshot(p.version);
        } catch (e) {
          return failed(`the source could not be snapshot: ${(e as Error).message}`);
        }
        let toolchain;
        try {
          toolchain = await buildToolchain({
            buildId: p.buildId,
            environmentId: p.environmentId,
            dataDir: content.dataDir,
            versionDir: snapshot.dir,
            slug: p.slug,
            profile: p.profile,
            scratch,
            signal: AbortSignal.any([shutdown, stop.signal]),
            providers: ctx.services.providers,
          });
        } catch (e) {
          // Nothing ran (no image, no engine, no right to hand the directory over): the log says why.
          await removeTree(snapshot.dir);
          const why = `the build toolchain could not start: ${(e as Error).message}`;
          return failed(why, `${why}\n`);
        }
        let result: BuildResult;
        let undisposed: Error | undefined;
        try {
          result = await runBuild({
            versionDir: snapshot.dir,
            workdir: toolchain.workdir,
            run: toolchain.run,
            env: toolchain.env,
            stepTimeoutMs: content.settings.buildStepTimeoutMs,
            onLog: (text) => live.append(text),
          });
        } finally {
          await toolchain.dispose().catch((e: Error) => (undisposed = e));
        }
        // Stopped under it: say nothing; the next epoch fails the build as interrupted and removes the directory.
        if (shutdown.aborted) return undefined;
        if (stop.signal.aborted) result = { ...result, ok: false, error: String(stop.signal.reason) };
        // A build container that may still write the version: it is never published.
        if (undisposed) result = { ...result, ok: false, error: `the build container could not be removed: ${undisposed.message}` };
        if (!result.ok) {
          await removeTree(snapshot.dir);
          return failed(result.error, result.log);
        }
        await makeReadOnly(snapshot.dir);
        return {
          type: 'build.succeeded',
          log: await putLog(artifacts, hidden(result.log)),
          packages: result.packages.slice(0, MAX_LISTED_PACKAGES),
          packageCount: result.packages.length,
          sizeBytes: result.sizeBytes,
          files: snapshot.files,
          at: ctx.services.now(),
        };
      } finally {
        content.running.delete(p.buildId);
        await removeTree(scratch);
      }
    },
    'build.discard': async (p: BuildDiscardParams, ctx) => {
      const content = ctx.services.content;
      if (!content) return;
      // An interrupted build's container may still run: removed first, so nothing writes the directory after.
      const profile = (await content.build(ctx.actorId))?.context.profile;
      if (profile) await ctx.services.providers.get(profile.provider).removeBuild?.(ctx.actorId);
      await removeTree(EnvironmentContent.of(content.dataDir, p.environmentId).versionDir(p.version));
    },
    'environment.report': async (p: BuildReportParams, ctx) => {
      try {
        await ctx.send('environment', p.environmentId, {
          type: 'environment.build_finished',
          version: p.version,
          status: p.status,
          error: p.error,
          packages: p.packages,
          sizeBytes: p.sizeBytes,
          startedAt: p.startedAt,
          at: ctx.services.now(),
        });
      } catch (e) {
        // Already reported (recovery may report twice): the environment knows.
        if (!isBerthError(e, 'invalid_state')) throw e;
      }
    },
  },
});
