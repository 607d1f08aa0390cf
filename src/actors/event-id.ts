/**
 * Deterministic event ids (DESIGN §3): a name-based uuid (RFC 9562 version 5 layout, SHA-1) so that retrying the
 * append of one decision sends the same id and the store recognises it as already written.
 */
import { hash } from 'node:crypto';

// A fixed namespace for Berth's event ids (a random v4 uuid chosen once).
const NAMESPACE = Buffer.from('6f1c2a9e4b7d4f0e9a53c8d2e1b7a604', 'hex');
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

// The namespace followed by the name is hashed from one reused buffer: a Buffer.from and a Buffer.concat per id were
// a third of the id, and every decision computes one.
let input = Buffer.allocUnsafe(1024);
NAMESPACE.copy(input);

export function nameUuid(name: string): string {
  const most = NAMESPACE.length + name.length * 3; // UTF-8 takes at most 3 bytes per UTF-16 unit
  if (most > input.length) {
    input = Buffer.allocUnsafe(most * 2);
    NAMESPACE.copy(input);
  }
  const length = NAMESPACE.length + input.write(name, NAMESPACE.length, 'utf8');
  const h = hash('sha1', input.subarray(0, length), 'buffer') as unknown as Buffer;
  const version = (h[6] & 0x0f) | 0x50;
  const variant = (h[8] & 0x3f) | 0x80;
  return (
    HEX[h[0]] + HEX[h[1]] + HEX[h[2]] + HEX[h[3]] + '-' + HEX[h[4]] + HEX[h[5]] + '-' + HEX[version] + HEX[h[7]] + '-' +
    HEX[variant] + HEX[h[9]] + '-' + HEX[h[10]] + HEX[h[11]] + HEX[h[12]] + HEX[h[13]] + HEX[h[14]] + HEX[h[15]]
  );
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
