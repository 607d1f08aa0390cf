/**
 * The providers this runtime was composed with, sealed before start. A profile naming a provider that is not
 * registered fails explicitly (`provider_missing`), never falls back to another.
 */
import { BerthError } from '../../schemas/errors.ts';
import type { HostSandbox, Provider } from '../providers/provider.ts';

export class ProviderRegistry {
  private readonly providers = new Map<string, Provider>();

  constructor(providers: Provider[]) {
    for (const p of providers) this.providers.set(p.kind, p);
  }

  get(kind: string): Provider {
    const p = this.providers.get(kind);
    if (!p) {
      throw new BerthError('provider_missing', `No provider "${kind}" is registered in this runtime.`, {
        provider: kind,
        registered: [...this.providers.keys()],
      });
    }
    return p;
  }

  kinds(): string[] {
    return [...this.providers.keys()];
  }

  /**
   * Who must own the files Berth makes in a managed workspace so that commands can write them: the one owner the
   * providers name (Provider.workspaceOwner), else the server itself.
   */
  workspaceOwner(): { uid: number; gid: number } | undefined {
    return [...this.providers.values()].find((p) => p.workspaceOwner)?.workspaceOwner;
  }

  /** The view host-side sandboxes are made with (Provider.hostSandbox): the one the providers name, if any. */
  hostSandbox(): HostSandbox | undefined {
    return [...this.providers.values()].find((p) => p.hostSandbox)?.hostSandbox;
  }

  async close(): Promise<void> {
    await Promise.all([...this.providers.values()].map((p) => p.close?.()));
  }
}
