/**
 * How Berth marks and names what it creates on a Docker engine: every container, network and volume of an
 * allocation carries the same identity labels, and `inspect`/`deallocate` find them again by label, never by memory.
 */
import { createHash } from 'node:crypto';
import type { AllocationIntent } from '../provider.ts';

export const LABEL = {
  managed: 'berth.managed',
  environmentId: 'berth.environment-id',
  allocationId: 'berth.allocation-id',
  requestId: 'berth.request-id',
  generation: 'berth.generation',
  /** The content version an allocation's container binds at /env/<slug>. */
  contentVersion: 'berth.content-version',
  /** The build a one-off build container runs (build-container.ts); recovery removes it by this label. */
  buildId: 'berth.build-id',
} as const;

export type Labels = Record<string, string>;

export function allocationLabels(intent: AllocationIntent, extra: Labels = {}): Labels {
  return {
    ...extra,
    [LABEL.managed]: 'true',
    [LABEL.environmentId]: intent.environmentId,
    [LABEL.allocationId]: intent.allocationId,
    [LABEL.requestId]: intent.requestId,
    [LABEL.generation]: String(intent.generation),
    ...(intent.contentVersion !== undefined ? { [LABEL.contentVersion]: String(intent.contentVersion) } : {}),
  };
}

/** The labels of a build's container and network: no allocation labels, so allocation lookups never see them. */
export function buildLabels(environmentId: string, buildId: string, extra: Labels = {}): Labels {
  return { ...extra, [LABEL.managed]: 'true', [LABEL.environmentId]: environmentId, [LABEL.buildId]: buildId };
}

/** The engine's `filters` query for resources Berth made that carry `key=value` (both labels must match). */
export const ownedBy = (key: string, value: string) => ({ label: [`${LABEL.managed}=true`, `${key}=${value}`] });

/**
 * Names derived from the request id: the same request always names the same container (the engine refuses a second
 * one with that name, so two racing allocations cannot both create), network, spool volume and workspace volume. The hash keeps names unique
 * when sanitising or truncating the request id made two of them look alike.
 */
export function resourceNames(requestId: string, prefix = 'berth'): { container: string; network: string; volume: string; workspace: string; content: string } {
  const readable = requestId.replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 48);
  const digest = createHash('sha256').update(requestId).digest('hex').slice(0, 10);
  const base = `${prefix}-${readable}-${digest}`;
  return { container: base, network: `${base}-net`, volume: `${base}-spool`, workspace: `${base}-workspace`, content: `${base}-content` };
}
