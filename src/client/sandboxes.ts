/**
 * `berth.sandboxes`: make a sandbox in one call (a lease with a profile, a workspace, a session and one open turn),
 * connect to one by id or name, list them. Each step is idempotent and retried with its key (the sandbox's name), so
 * a create whose answers were lost and is retried makes one sandbox, never two.
 */
import { randomUUID } from 'node:crypto';
import type { Profile } from '../../schemas/profile.ts';
import type { BerthCore, Lease, Workspace } from './berth-core.ts';
import { BerthApiError } from './berth-api-error.ts';
import { Sandbox, sandboxInfo, sandboxTurnKey, type SandboxInfo } from './sandbox.ts';

/** The work kind of a sandbox's lease: `list()` answers these leases only. */
export const SANDBOX_WORK_KIND = 'sandbox';

export interface CreateSandbox {
  /** Its name, unique in the scope (default: generated); creating an existing name answers that sandbox. */
  name?: string;
  /** The machine's profile, or the id, name or slug of an environment whose profile it copies (default: native). */
  profile?: Partial<Profile> | string;
  /** An existing workspace (id or name) to work in; default: a new one, deleted by `kill`. */
  workspace?: string;
  /** Kill it this long after creation unless `sandbox.setTimeout` moves the deadline (default: no timeout). */
  timeoutMs?: number;
  lease?: {
    /** How long a pause may last before the machine is reclaimed (seconds). */
    idleSeconds?: number;
    /** Variables every command of the sandbox gets (never answered back). */
    env?: Record<string, string>;
  };
}

const workspaceName = (name: string) => `sandbox ${name}`;

export class Sandboxes {
  constructor(private readonly berth: BerthCore) {}

  async create(options: CreateSandbox = {}): Promise<Sandbox> {
    const name = options.name ?? `sbx-${randomUUID()}`;
    const workspace = options.workspace === undefined ? await this.workspaceOf(name) : await this.resolveWorkspace(options.workspace);
    // An environment's id or name goes to the server as it is: the server resolves names in the caller's scope.
    const profile = typeof options.profile === 'string' ? { environmentId: options.profile } : { profile: options.profile ?? {} };
    await this.berth.retry(
      () =>
        this.berth.leases.bind({
          key: name,
          work: { kind: SANDBOX_WORK_KIND, id: name },
          workspaceId: workspace.id,
          ...profile,
          ...(options.lease?.idleSeconds !== undefined ? { idleSeconds: options.lease.idleSeconds } : {}),
          ...(options.lease?.env ? { spawn: { env: options.lease.env } } : {}),
        }),
    );
    if (options.timeoutMs !== undefined) await this.berth.retry(() => this.berth.leases.setTimeout(name, options.timeoutMs!));
    return this.open(name, options.workspace === undefined);
  }

  /** The sandbox of this id or name, with the one turn its clients share. */
  async connect(idOrName: string): Promise<Sandbox> {
    const lease = await this.lease(idOrName);
    return this.open(lease.key, await this.ownsWorkspace(lease));
  }

  /** Every sandbox of the caller's scope not killed. */
  async list(): Promise<SandboxInfo[]> {
    return (await this.berth.retry(() => this.berth.leases.list({ workKind: SANDBOX_WORK_KIND }))).map(sandboxInfo);
  }

  /** Kills a sandbox by id or name without connecting a handle first. */
  async kill(idOrName: string): Promise<void> {
    const lease = await this.lease(idOrName);
    if (lease.state !== 'released' && lease.state !== 'releasing') return (await this.connect(idOrName)).kill();
    // Its timeout released it already (no machine to acquire): what is left is its turn and the workspace it made.
    if (!lease.sessionId) return;
    const turn = await this.berth.retry(() => this.berth.turns.open(lease.sessionId!, { key: sandboxTurnKey(lease.key) }));
    await new Sandbox(this.berth, lease, turn, await this.ownsWorkspace(lease)).kill();
  }

  /** Whether the sandbox made its workspace (then `kill` deletes it), by the name it gave it. */
  private async ownsWorkspace(lease: Lease): Promise<boolean> {
    const workspace = lease.workspaceId ? await this.berth.retry(() => this.berth.workspaces.get(lease.workspaceId!)) : undefined;
    return workspace?.name === workspaceName(lease.key);
  }

  private async open(name: string, ownsWorkspace: boolean): Promise<Sandbox> {
    const { lease } = await this.berth.retry(() => this.berth.leases.acquire(name));
    if (!lease.sessionId) throw new BerthApiError(409, 'invalid_state', `sandbox ${name} has no workspace`, { name });
    const turn = await this.berth.retry(() => this.berth.turns.open(lease.sessionId!, { key: sandboxTurnKey(name) }));
    if (turn.state !== 'open') throw new BerthApiError(409, 'invalid_state', `sandbox ${name} was killed`, { name, reason: 'killed' });
    return new Sandbox(this.berth, lease, turn, ownsWorkspace);
  }

  /** A lease by key (a sandbox's name) or by id (`hlse_…`: looked up among the scope's sandboxes). */
  private async lease(idOrName: string): Promise<Lease> {
    if (!/^hlse_[0-9a-f]{32}$/.test(idOrName)) return this.berth.retry(() => this.berth.leases.get(idOrName));
    const leases = await this.berth.retry(() => this.berth.leases.list({ workKind: SANDBOX_WORK_KIND }));
    const lease = leases.find((l) => l.id === idOrName);
    if (!lease) throw new BerthApiError(404, 'not_found', `no sandbox ${idOrName}`, { id: idOrName });
    return lease;
  }

  /**
   * The sandbox's own workspace, found by its name before one is made: a create retried after a lost answer (or
   * repeated with the same name) reuses it instead of making a second.
   */
  private async workspaceOf(name: string): Promise<Workspace> {
    const existing = await this.findWorkspace(workspaceName(name));
    return existing ?? this.berth.retry(() => this.berth.workspaces.create({ name: workspaceName(name) }));
  }

  private async findWorkspace(name: string): Promise<Workspace | undefined> {
    return (await this.berth.retry(() => this.berth.workspaces.list())).find((w) => w.name === name);
  }

  private async resolveWorkspace(idOrName: string): Promise<Workspace> {
    if (/^hwsp_/.test(idOrName)) return this.berth.retry(() => this.berth.workspaces.get(idOrName));
    const found = await this.findWorkspace(idOrName);
    if (!found) throw new BerthApiError(404, 'not_found', `no workspace named ${idOrName}`, { name: idOrName });
    return found;
  }
}
