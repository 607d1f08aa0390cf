/**
 * The build actor (stream `build-<henv_…>-<version>`): one build of one content version (seed 001 §4).
 *
 *   pristine ─build.requested→ building ─build.succeeded→ ready
 *                                       ─build.failed→ failed
 *                                       ─runtime.recovered (a later epoch)→ failed ("interrupted by a runtime restart")
 *
 * `build.run` (snapshot, install, make read-only) is named only by the request. A build still `building` when a new
 * epoch recovers it lost its installers with the old process: it is failed and its partial version removed, never run
 * again (DESIGN §4 rule 7). Every outcome is reported to the environment, which activates a ready version.
 */
import { assign, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { BuildEvent, InstalledPackageJson } from '../../schemas/events/build.ts';
import { emptyProfile, type Profile } from '../../schemas/profile.ts';
import { effect } from './effect.ts';
import type { IncomingEvent, Rejection } from './rejection.ts';
import { nextUpdatedAt } from './updated-at.ts';

export const INTERRUPTED = 'interrupted by a runtime restart';

export interface BuildContext {
  id: string;
  environmentId: string;
  version: number;
  scope: string;
  slug: string;
  profile: Profile;
  /** The runtime epoch that runs the installers. */
  runtimeId: string;
  epoch: number;
  error: string;
  log: { digest: string; size: number } | null;
  packages: InstalledPackageJson[];
  packageCount: number;
  sizeBytes: number;
  files: number;
  startedAt: number;
  finishedAt: number | null;
  updatedAt: number;
}

/**
 * `build.run`: snapshot the source into `versions/<version>`, install in the provider's toolchain with the version
 * at `/env/<slug>`, make it read-only; report `build.succeeded`, or `build.failed` (removing the version directory).
 * When the runtime stops first it reports nothing: the next epoch's recovery fails the build.
 */
export interface BuildRunParams {
  buildId: string;
  environmentId: string;
  version: number;
  slug: string;
  profile: Profile;
}

/** `build.discard`: remove what an interrupted build left of its version directory. */
export interface BuildDiscardParams {
  environmentId: string;
  version: number;
}

/**
 * `environment.report`: send `environment.build_finished` to the environment; an `invalid_state` rejection means it
 * already knows (recovery may report twice).
 */
export interface BuildReportParams {
  environmentId: string;
  version: number;
  status: 'ready' | 'failed';
  error: string;
  packages: number;
  sizeBytes: number;
  startedAt: number;
}

const runParams = ({ context }: { context: BuildContext }): BuildRunParams => ({
  buildId: context.id,
  environmentId: context.environmentId,
  version: context.version,
  slug: context.slug,
  profile: context.profile,
});

const reportParams = ({ context }: { context: BuildContext }): BuildReportParams => ({
  environmentId: context.environmentId,
  version: context.version,
  status: context.error ? 'failed' : 'ready',
  error: context.error,
  packages: context.packageCount,
  sizeBytes: context.sizeBytes,
  startedAt: context.startedAt,
});

const run = { type: 'build.run', params: runParams } as const;
const report = { type: 'environment.report', params: reportParams } as const;
const discard = {
  type: 'build.discard',
  params: ({ context }: { context: BuildContext }): BuildDiscardParams => ({ environmentId: context.environmentId, version: context.version }),
} as const;

const buildSetup = setup({
  types: {
    context: {} as BuildContext,
    events: {} as BuildEvent,
    input: {} as { id: string },
  },
  guards: {
    /** Only a runtime other than the one running the installers may declare them gone. */
    isLaterEpoch: ({ context, event }) =>
      event.type === 'runtime.recovered' && (event.runtimeId !== context.runtimeId || event.epoch > context.epoch),
  },
  actions: {
    'build.run': effect<BuildRunParams>(),
    'build.discard': effect<BuildDiscardParams>(),
    'environment.report': effect<BuildReportParams>(),
    stamp: assign({ updatedAt: ({ context, event }) => nextUpdatedAt(context.updatedAt, event.at) }),
    request: assign(({ event }) => {
      if (event.type !== 'build.requested') return {};
      const { environmentId, version, scope, slug, profile, runtimeId, epoch, at } = event;
      return { environmentId, version, scope, slug, profile, runtimeId, epoch, startedAt: at };
    }),
    succeed: assign(({ event }) => {
      if (event.type !== 'build.succeeded') return {};
      const { log, packages, packageCount, sizeBytes, files, at } = event;
      return { log, packages, packageCount, sizeBytes, files, finishedAt: at };
    }),
    fail: assign(({ event }) => {
      if (event.type === 'build.failed') return { error: event.error, log: event.log ?? null, finishedAt: event.at };
      if (event.type === 'runtime.recovered') return { error: INTERRUPTED, finishedAt: event.at };
      return {};
    }),
  },
});

export const buildMachine = buildSetup.createMachine({
  id: 'build',
  context: ({ input }) => ({
    id: input.id,
    environmentId: '',
    version: 0,
    scope: '',
    slug: '',
    profile: emptyProfile,
    runtimeId: '',
    epoch: 0,
    error: '',
    log: null,
    packages: [],
    packageCount: 0,
    sizeBytes: 0,
    files: 0,
    startedAt: 0,
    finishedAt: null,
    updatedAt: 0,
  }),
  initial: 'pristine',
  states: {
    pristine: {
      on: { 'build.requested': { target: 'building', actions: ['request', 'stamp', run] } },
    },
    building: {
      on: {
        'build.succeeded': { target: 'ready', actions: ['succeed', 'stamp', report] },
        'build.failed': { target: 'failed', actions: ['fail', 'stamp', report] },
        'runtime.recovered': { guard: 'isLaterEpoch', target: 'failed', actions: ['fail', 'stamp', discard, report] },
      },
    },
    ready: { type: 'final' },
    failed: { type: 'final' },
  },
});

export type BuildSnapshot = SnapshotFrom<typeof buildMachine>;

/** `building`, `ready` or `failed` (`pristine` never leaves the runtime: such a build does not exist). */
export const buildStatus = (snapshot: { value: unknown }): 'building' | 'ready' | 'failed' =>
  snapshot.value === 'ready' ? 'ready' : snapshot.value === 'failed' ? 'failed' : 'building';

export const finished = (snapshot: BuildSnapshot): boolean => snapshot.status === 'done';

export const reject = (snapshot: BuildSnapshot, event: IncomingEvent): Rejection => {
  const state = snapshot.value;
  if (event.type === 'build.requested' && state !== 'pristine') {
    return { code: 'invalid_state', message: 'That build was already requested.', detail: { state, reason: 'already_requested' } };
  }
  if (state === 'pristine') return { code: 'not_found', message: 'No such build.', detail: { state } };
  return { code: 'invalid_state', message: `The build does not accept ${event.type} while ${state}.`, detail: { state } };
};
