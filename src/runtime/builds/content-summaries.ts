/**
 * The content fields of the environment object that cost I/O, kept between requests: the source's file count and
 * bytes (a walk of its tree) and the active version's packages (a build actor load). So listing 1,000 environments
 * walks no tree and loads no actor, and reads what is kept without a promise per environment. The content service
 * drops an environment's file summary after every change it makes (a write, removal or import through its API, a
 * delete, crash recovery); the runtime is the only writer of its data directory (data-dir-lock.ts). A ready build's
 * packages never change, so they are kept by version.
 */
import type { InstalledPackageJson } from '../../../schemas/events/build.ts';

export interface FileSummary {
  count: number;
  bytes: number;
}

export interface SummaryLoaders {
  files(environmentId: string): Promise<FileSummary>;
  /** The packages of a version; undefined while its build is not final (not kept then). */
  packages(environmentId: string, version: number): Promise<InstalledPackageJson[] | undefined>;
}

/** A kept load: its value once it has one. Kept from the start, so concurrent readers share one load. */
interface Slot<T> {
  value?: T;
  loading: Promise<T>;
}

export class ContentSummaries {
  private readonly files = new Map<string, Slot<FileSummary>>();
  /** One version per environment: the active one (an activation elsewhere loads once more). */
  private readonly packages = new Map<string, Slot<InstalledPackageJson[] | undefined> & { version: number }>();

  constructor(private readonly load: SummaryLoaders) {}

  /** The file summary of each environment, in order. */
  async filesOf(environmentIds: readonly string[]): Promise<FileSummary[]> {
    const slots = environmentIds.map((id) => this.files.get(id) ?? this.keep(this.files, id, this.load.files(id), {}));
    await Promise.all(slots.filter((s) => !('value' in s)).map((s) => s.loading));
    return slots.map((s) => s.value!);
  }

  /** The packages of each environment's active version (none without one), in order. */
  async packagesOf(environments: readonly { id: string; activeVersion: number | null }[]): Promise<InstalledPackageJson[][]> {
    const slots = environments.map(({ id, activeVersion: version }) => {
      if (version === null) return undefined;
      const kept = this.packages.get(id);
      return kept?.version === version ? kept : this.keep(this.packages, id, this.load.packages(id, version), { version });
    });
    await Promise.all(slots.filter((s) => s && !('value' in s)).map((s) => s!.loading));
    return slots.map((s) => s?.value ?? []);
  }

  /** The source of the environment changed (or went away): the next read walks it again. */
  changed(environmentId: string): void {
    this.files.delete(environmentId);
  }

  /** The environment and its content are gone. */
  forget(environmentId: string): void {
    this.files.delete(environmentId);
    this.packages.delete(environmentId);
  }

  /** Keeps a load under `id` until it fails or settles undefined (not final), or `changed`/`forget` drop it. */
  private keep<T, S extends Slot<T>>(map: Map<string, S>, id: string, loading: Promise<T>, extra: Omit<S, keyof Slot<T>>): S {
    const slot = { ...extra, loading } as S;
    map.set(id, slot);
    const drop = () => map.get(id) === slot && map.delete(id);
    loading.then((value) => (value === undefined ? drop() : (slot.value = value)), drop);
    return slot;
  }
}
