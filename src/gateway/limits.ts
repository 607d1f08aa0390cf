/** The gateway's bounds: body size, long-poll and streaming pace, and how far a slow WebSocket reader may fall behind. */
export interface GatewayLimits {
  /** Largest request body accepted (bytes); a larger one is `invalid_request` with `detail.max_bytes`. */
  bodyBytes: number;
  /** Cap on `GET /v1/executions/{id}?waitMs=`. */
  maxWaitMs: number;
  /** Largest `GET …/output` answer (bytes). */
  outputReadBytes: number;
  /** Largest output frame / SSE event. */
  chunkBytes: number;
  /**
   * Largest runtime read of a follower (WebSocket, SSE) of a busy stream, sent `chunkBytes` at a time. A busy
   * follower holds three buffers of this size (the one being sent, two reads under way).
   */
  followReadBytes: number;
  /** How long a follower waits for new output before checking status again. */
  pollMs: number;
  /** Interval of SSE heartbeat comments. */
  heartbeatMs: number;
  /** A WebSocket's send buffer bound: above it the gateway stops reading output for that client. */
  wsBufferBytes: number;
  /** How long the send buffer may stay above the bound before the client is closed with 1013. */
  wsStallMs: number;
  /** Largest client -> server WebSocket frame (stdin chunk). */
  wsMaxFrameBytes: number;
}

export const defaultLimits: GatewayLimits = {
  bodyBytes: 1024 * 1024,
  maxWaitMs: 60_000,
  outputReadBytes: 4 * 1024 * 1024,
  chunkBytes: 1024 * 1024,
  followReadBytes: 4 * 1024 * 1024,
  pollMs: 250,
  heartbeatMs: 15_000,
  wsBufferBytes: 2 * 1024 * 1024,
  wsStallMs: 10_000,
  wsMaxFrameBytes: 1024 * 1024,
};
