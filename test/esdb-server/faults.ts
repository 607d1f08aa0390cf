/**
 * Faults the test server injects on demand, each one at most once and in the order armed: what a real cluster does
 * now and then (a lost answer, a dropped stream, a timeout, a leader change, an unexpected result), made repeatable.
 */
export type Fault =
  /** The append lands, then every connection is cut before its answer leaves: the client sees the call fail. */
  | { op: 'append'; kind: 'lose-answer' }
  /** The append lands and is answered with Status.Timeout, as a commit timeout is (its outcome unknown to the client). */
  | { op: 'append'; kind: 'timeout' }
  /** The append does not land and is answered with Status.Unknown (an operation result the gRPC layer cannot map). */
  | { op: 'append'; kind: 'unknown' }
  /** The call does not complete: a batch append is answered Timeout at its deadline (at most the write timeout, 2 s),
   * as a node whose write never commits answers it; a read or a unary append is never answered. */
  | { op: 'append' | 'read' | 'subscribe'; kind: 'hang' }
  /** After `events` events the server cuts every connection (a node restart, a network partition). */
  | { op: 'read' | 'subscribe'; kind: 'drop'; events: number }
  /** The call ends with gRPC status UNKNOWN and no exception key (RpcExceptions.UnknownError). */
  | { op: 'read'; kind: 'unknown' };

export type FaultOp = Fault['op'];

export class FaultPlan {
  private readonly armed: Fault[] = [];
  /** Faults injected so far, for tests that assert the fault did happen. */
  readonly injected: Fault[] = [];

  arm(...faults: Fault[]): void {
    this.armed.push(...faults);
  }

  /** The next armed fault for `op`, consumed; undefined when none is armed. */
  take(op: FaultOp): Fault | undefined {
    const i = this.armed.findIndex((f) => f.op === op);
    if (i < 0) return undefined;
    const [fault] = this.armed.splice(i, 1);
    this.injected.push(fault);
    return fault;
  }

  get pending(): number {
    return this.armed.length;
  }
}
