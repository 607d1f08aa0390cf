/**
 * Which scope (tenant) a stream belongs to, for the audit feed and stream replay: read from the actor that owns the
 * stream (allocations belong to their environment's scope). Runtime and snapshot streams are the admin's only. A feed
 * read from the start learns each stream's scope from the stream's first event instead, which names it (a creation:
 * `environment.created`, `execution.accepted`…; an allocation's names its environment): a member's feed over a store
 * of a million executions loaded an actor for each, 565 s of the server's CPU for one request.
 */
import type { ActorRuntime } from '../../actors/actor-runtime.ts';
import type { RecordedEvent } from '../../store/event-store.ts';
import type { Caller } from '../runtime-api.ts';

const SCOPED = ['environment', 'execution', 'session', 'build', 'harness', 'workspace', 'turn', 'ownership', 'mount', 'lease'] as const;
/**
 * Streams whose scope is kept, in each of two generations (a stream name and a scope an entry): when the newer fills,
 * the older is dropped whole. A feed looks at every row of the log, millions, so an entry is never moved on a hit (a
 * least-recently-used order cost 3 us a look); a miss looks the actor up again.
 */
const KNOWN_STREAMS = 200_000;

/** The actor type a stream belongs to (`<type>-<id>`), '' for a stream without one. */
const typeOf = (stream: string): string => {
  const dash = stream.indexOf('-');
  return dash < 0 ? '' : stream.slice(0, dash);
};

const seesEveryScope = (caller: Caller): boolean => caller.role === 'admin' && caller.scope === '*';

export class ScopeIndex {
  private newer = new Map<string, string>();
  private older = new Map<string, string>();

  constructor(private readonly actors: ActorRuntime<any>) {}

  /** Takes the scope a stream's first event names (see above); any other event teaches nothing. */
  learn(e: RecordedEvent): void {
    if (e.revision !== 0n) return;
    const data = e.data as { scope?: unknown; environmentId?: unknown } | null;
    const type = typeOf(e.stream);
    if ((SCOPED as readonly string[]).includes(type) && typeof data?.scope === 'string') this.keep(e.stream, data.scope);
    else if (type === 'allocation' && typeof data?.environmentId === 'string') {
      const scope = this.known(`environment-${data.environmentId}`);
      if (scope !== undefined) this.keep(e.stream, scope);
    }
  }

  async visible(caller: Caller, stream: string): Promise<boolean> {
    if (seesEveryScope(caller)) return true;
    return (await this.scopeOf(stream)) === caller.scope;
  }

  /**
   * Whether `caller`'s feed passes an event over undecoded: a snapshot's, or a later one of a stream known to be another
   * scope's (a first event is read all the same: it names its stream's scope).
   */
  skips(caller: Caller, stream: string, revision: bigint): boolean {
    if (stream.startsWith('snapshot-')) return true;
    if (seesEveryScope(caller) || revision === 0n) return false;
    const known = this.known(stream);
    return known !== undefined && known !== caller.scope;
  }

  async scopeOf(stream: string): Promise<string | null> {
    const known = this.known(stream);
    if (known !== undefined) return known;
    const scope = await this.lookup(stream);
    if (scope !== null) this.keep(stream, scope);
    return scope;
  }

  private known(stream: string): string | undefined {
    return this.newer.get(stream) ?? this.older.get(stream);
  }

  private keep(stream: string, scope: string): void {
    if (this.newer.size >= KNOWN_STREAMS) {
      this.older = this.newer;
      this.newer = new Map();
    }
    this.newer.set(stream, scope);
  }

  private async lookup(stream: string): Promise<string | null> {
    const type = typeOf(stream);
    const id = stream.slice(type.length + 1);
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
