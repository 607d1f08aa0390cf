/**
 * What the content effects (build actor, execution submit) are handed as `services.content`: where content lives,
 * its settings, the builds running in this process (their live logs, and a way to stop them), and a look at actors
 * they do not own (an environment's slug, a build's state), and a logger. Absent when the chapter is switched off.
 */
import type { Logger } from 'pino';
import type { ContentSettings } from './content-settings.ts';
import type { BuildContext } from '../../machines/build.machine.ts';
import type { EnvironmentContext } from '../../machines/environment.machine.ts';
import type { BuildLog } from '../../content/build-log.ts';

export interface ContentRuntime {
  dataDir: string;
  settings: ContentSettings;
  /** The builds running in this process, by build id, while they run. */
  running: Map<string, RunningBuild>;
  /** Where content cleanup says what it had to leave behind. */
  logger?: Pick<Logger, 'warn'>;
  environment(environmentId: string): Promise<EnvironmentContext | undefined>;
  build(buildId: string): Promise<{ state: string; context: BuildContext } | undefined>;
}

export interface RunningBuild {
  log: BuildLog;
  /** Stops the build's installers; the build fails with the reason (a string) as its error. */
  stop: AbortController;
}

/** Stops every build running in this process (the data directory is under its reserve), each failing with `why`. */
export function stopBuilds(content: ContentRuntime, why: string): void {
  for (const build of content.running.values()) if (!build.stop.signal.aborted) build.stop.abort(why);
}

/** The build actor id (its stream is `build-<id>`). */
export const buildIdOf = (environmentId: string, version: number): string => `${environmentId}-${version}`;
