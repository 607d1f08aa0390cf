/**
 * The `remote` provider: allocations on Execution Hosts the admin configured (BERTH_REMOTE_HOSTS), each a `berth
 * host` reached over its Unix socket or HTTPS. A profile names its host (`{provider: "remote", host: "<name>"}`);
 * allocate, inspect and deallocate go to that host by the original request identity, like the other providers. A
 * host that does not answer makes its allocations' reports `unknown` (the caller's timeout and errors), never absent.
 */
import { BerthError } from '../../../schemas/errors.ts';
import { allocationReportSchema } from '../../../schemas/events/allocation.ts';
import { deallocateAnswerSchema, type Hello, type HostTarget } from '../../../schemas/host-protocol.ts';
import type { Profile } from '../../../schemas/profile.ts';
import type { FileHost } from '../file-host.ts';
import type { Admission, AllocationIntent, AllocationRef, AllocationReport, Executor, Provider, VersionedCommand } from '../provider.ts';
import { workspaceCwd } from '../workspace-view.ts';
import { backendOf as hostBackendOf, type HostBackend } from './hosted.ts';
import { HostClient, type RemoteHostConfig } from './host-client.ts';
import { RemoteExecutor } from './remote-executor.ts';
import { RemoteFileHost } from './remote-file-host.ts';

/** How long `available` waits for a host's hello. */
const PROBE_MS = 2_000;

export class RemoteProvider implements Provider {
  readonly kind = 'remote' as const;
  /** A host is a borrowed machine, as native is: Berth never destroys it nor reclaims it when idle. */
  readonly ownership = 'borrowed' as const;
  /** A host whose data directory was wiped comes back as another incarnation: its old allocations are lost. */
  readonly replaceable = true;
  readonly defaultReuse = 'scope' as const;
  readonly contentBinding = 'command' as const;
  /** The host gives its own base (its PATH and account for native commands, the image's in a container). */
  readonly commandBase = 'image' as const;
  /** The view lives on the host (a directory it keeps, or the container's staging volume), filled through fileHost. */
  readonly workspaceView = 'materialized' as const;
  private readonly hosts = new Map<string, HostClient>();

  constructor(configs: RemoteHostConfig[], clientFor: (config: RemoteHostConfig) => HostClient = (c) => new HostClient(c)) {
    for (const config of configs) this.hosts.set(config.name, clientFor(config));
  }

  /** Content versions live in the control plane's data directory, which a host does not see. */
  versionedCommand(): VersionedCommand {
    throw new BerthError('unavailable', 'Content versions are not served to remote hosts.', { reason: 'remote_unsupported' });
  }

  /** A profile must name a configured host: refused at create, before anything is recorded. */
  checkProfile(profile: Profile): void {
    if (profile.host !== undefined && this.hosts.has(profile.host)) return;
    throw new BerthError('invalid_request', `A remote profile must name a configured host (${[...this.hosts.keys()].join(', ') || 'none configured'}).`, {
      field: 'profile.host',
      host: profile.host ?? null,
      hosts: [...this.hosts.keys()],
    });
  }

  private client(profile: Profile | undefined): HostClient {
    const name = profile?.host;
    const client = name === undefined ? undefined : this.hosts.get(name);
    if (!client) {
      throw new BerthError('environment_invalid', `A remote profile must name a configured host (${[...this.hosts.keys()].join(', ') || 'none configured'}).`, {
        host: name ?? null,
        hosts: [...this.hosts.keys()],
      });
    }
    return client;
  }

  private target(ref: AllocationRef & { generation?: number }): HostTarget {
    return {
      environmentId: ref.environmentId,
      allocationId: ref.allocationId,
      requestId: ref.requestId,
      generation: ref.generation ?? 0,
      ...(ref.identity?.incarnation ? { incarnation: ref.identity.incarnation } : {}),
    };
  }

  /** The host's report, its identity named after the configured host (the control plane's name for it). */
  private async report(client: HostClient, path: string, body: unknown): Promise<AllocationReport> {
    const report = await client.call(path, body, allocationReportSchema);
    if ('identity' in report && report.identity) return { ...report, identity: { ...report.identity, resourceId: client.config.name } } as AllocationReport;
    return report;
  }

  async allocate(intent: AllocationIntent): Promise<AllocationReport> {
    const client = this.client(intent.profile);
    return this.report(client, '/v1/provider/allocate', { target: this.target(intent), profile: intent.profile });
  }

  async inspect(ref: AllocationRef): Promise<AllocationReport> {
    return this.report(this.client(ref.profile), '/v1/provider/inspect', { target: this.target(ref) });
  }

  async deallocate(ref: AllocationRef): Promise<'terminated' | 'unknown'> {
    const answer = await this.client(ref.profile).call('/v1/provider/deallocate', { target: this.target(ref) }, deallocateAnswerSchema);
    return answer.result;
  }

  executor(ref: AllocationRef, profile: Profile): Executor {
    return new RemoteExecutor(this.client(profile), this.target(ref));
  }

  /** The allocation's view on its host (the ref carries its profile and generation: the host fences by them). */
  async fileHost(ref: AllocationRef): Promise<FileHost> {
    return new RemoteFileHost(this.client(ref.profile), this.target(ref));
  }

  /** A workspace execution takes its cwd from the view (relative under it), never one of its own. */
  admit(admission: Admission): void {
    if (admission.workspace) workspaceCwd(admission.workspace, admission.cwd, 'materialized');
  }

  /** The host a profile names and the provider of it that runs it: each answers (or not) on its own. */
  backendOf(profile: Profile): string {
    return `${profile.host ?? ''}/${hostBackendOf(profile)}`;
  }

  /** With a profile: whether its host answers and serves its backend; without: whether any configured host answers. */
  async available(profile?: Profile): Promise<boolean> {
    const clients = profile ? [this.client(profile)] : [...this.hosts.values()];
    const answers = await Promise.all(clients.map((c) => probe(c, profile && hostBackendOf(profile))));
    return answers.some(Boolean);
  }

  async close(): Promise<void> {
    for (const client of this.hosts.values()) client.close();
  }
}

async function probe(client: HostClient, backend?: HostBackend): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), PROBE_MS)));
  try {
    const served = (hello: Hello) => backend === undefined || (hello.backends ?? ['native']).includes(backend);
    return await Promise.race([client.handshake().then(served, () => false), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
