/**
 * Deterministic event ids (DESIGN §3): a name-based uuid (RFC 9562 version 5 layout, SHA-1) so that retrying the
 * append of one decision sends the same id and the store recognises it as already written.
 */
import { hash } from 'node:crypto';

// A fixed namespace for Berth's event ids (a random v4 uuid chosen once).
const NAMESPACE = Buffer.from('6f1c2a9e4b7d4f0e9a53c8d2e1b7a604', 'hex');

export function nameUuid(name: string): string {
  // One-shot hash: a Hash object per id cost half of the id (every decision computes one).
  const h = hash('sha1', Buffer.concat([NAMESPACE, Buffer.from(name)]), 'buffer');
  h[6] = (h[6] & 0x0f) | 0x50;
  h[8] = (h[8] & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/**
 * The id of the event a decision appends at `revision` of `stream`. Stream and revision alone are not enough: two
 * runtimes deciding at the same revision would share an id, and the store would take the loser's append for a retry
 * of the winner's, silently dropping it. So the id also names the deciding runtime incarnation and the event itself.
 */
export const decisionEventId = (
  stream: string,
  revision: bigint,
  decider: { runtimeId: string; epoch: number },
  type: string,
  data: unknown,
): string => nameUuid(JSON.stringify([stream, revision.toString(), decider.runtimeId, decider.epoch, type, data]));
