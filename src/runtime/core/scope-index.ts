/**
 * Which scope (tenant) a stream belongs to, for the audit feed and stream replay: read from the actor that owns the
 * stream (allocations belong to their environment's scope). Runtime and snapshot streams are the admin's only.
 */
import type { ActorRuntime } from '../../actors/actor-runtime.ts';
import type { Caller } from '../runtime-api.ts';

const SCOPED = ['environment', 'execution', 'session', 'build', 'harness', 'workspace', 'turn', 'ownership', 'mount', 'lease'] as const;

export class ScopeIndex {
  private readonly known = new Map<string, string | null>();

  constructor(private readonly actors: ActorRuntime<any>) {}

  async visible(caller: Caller, stream: string): Promise<boolean> {
    if (caller.role === 'admin' && caller.scope === '*') return true;
    return (await this.scopeOf(stream)) === caller.scope;
  }

  async scopeOf(stream: string): Promise<string | null> {
    if (this.known.has(stream)) return this.known.get(stream)!;
    const scope = await this.lookup(stream);
    if (scope !== null) this.known.set(stream, scope);
    return scope;
  }

  private async lookup(stream: string): Promise<string | null> {
    const dash = stream.indexOf('-');
    const type = stream.slice(0, dash);
    const id = stream.slice(dash + 1);
    try {
      if (type === 'allocation') {
        const a = await this.actors.get('allocation', id);
        return a?.context.environmentId ? this.scopeOf(`environment-${a.context.environmentId}`) : null;
      }
      if ((SCOPED as readonly string[]).includes(type)) {
        const view = await this.actors.get(type, id);
        return view?.context.scope || null;
      }
    } catch {
      return null;
    }
    return null;
  }
}
