/**
 * What the content effects (build actor, execution submit) are handed as `services.content`: where content lives,
 * its settings, the live logs of builds running in this process, and a look at actors they do not own (an
 * environment's slug, a build's state), and a logger. Absent when the chapter is switched off.
 */
import type { Logger } from 'pino';
import type { ContentSettings } from './content-settings.ts';
import type { BuildContext } from '../../machines/build.machine.ts';
import type { EnvironmentContext } from '../../machines/environment.machine.ts';
import type { BuildLog } from '../../content/build-log.ts';

export interface ContentRuntime {
  dataDir: string;
  settings: ContentSettings;
  /** Logs of the builds running in this process, by build id, while they run. */
  liveLogs: Map<string, BuildLog>;
  /** Where content cleanup says what it had to leave behind. */
  logger?: Pick<Logger, 'warn'>;
  environment(environmentId: string): Promise<EnvironmentContext | undefined>;
  build(buildId: string): Promise<{ state: string; context: BuildContext } | undefined>;
}

/** The build actor id (its stream is `build-<id>`). */
export const buildIdOf = (environmentId: string, version: number): string => `${environmentId}-${version}`;
