/**
 * Who calls the runtime, and the tenant rule: a caller sees its own scope; an admin calling in scope `*` sees every
 * scope. A resource outside the caller's scope is answered as missing, never as forbidden.
 */
export interface Caller {
  scope: string;
  role: 'admin' | 'member';
}

export const inScope = (caller: Caller, scope: string): boolean => caller.scope === scope || (caller.role === 'admin' && caller.scope === '*');

/** The scope a listing filters by: the caller's, or none (every scope) for an admin calling in scope `*`. */
export const listedScope = (caller: Caller): string | undefined => (caller.role === 'admin' && caller.scope === '*' ? undefined : caller.scope);
