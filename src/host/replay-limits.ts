/** The bounds of an Execution Host's output replay (SSE, WebSocket, byte streams): the gateway's defaults. */
export const replayLimits = {
  /** Output bytes per SSE event (base64 in JSON: about 64 KiB on the wire) and per WebSocket frame. */
  eventBytes: 48 * 1024,
  /** Bytes per read of a raw byte stream. */
  streamBytes: 1 << 20,
  /** Output bytes buffered for one client beyond what its socket took. */
  bufferBytes: 1 << 20,
  heartbeatMs: 15_000,
  /** A client that takes nothing this long is dropped (it reconnects from its cursor). */
  stallMs: 10_000,
  /** How long one wait for more output lasts before the replay looks again. */
  waitMs: 1_000,
};

/** Where a replay says it dropped a client (one line, never a header or a body). */
export interface ReplayLog {
  info(detail: object, message: string): void;
}
