/**
 * The gateway's bounds: body size and how much of a refused body it reads, long-poll and streaming pace, how much
 * output one streaming client may hold in server memory, how long it may stall, how many streams a token may hold
 * open, and how many requests a member token may send.
 */
import { BerthError } from '../../schemas/errors.ts';

export interface GatewayLimits {
  /** Largest JSON request body accepted (bytes); a larger one is `body_too_large` (413) with `detail.max_bytes`. */
  bodyBytes: number;
  /**
   * Of a request answered before its body was read (a refusal), the most the gateway reads and drops so the client
   * can finish sending and read the answer, in bytes and in time; past either, the connection closes after it.
   */
  discardBytes: number;
  discardMs: number;
  /**
   * After such an answer with `Connection: close`, how long the gateway holds the connection, reading no more, before
   * it closes: closing at once resets it, and a client that is still writing meets EPIPE instead of the answer.
   */
  closeLingerMs: number;
  /** Cap on `GET /v1/executions/{id}?waitMs=`. */
  maxWaitMs: number;
  /** Largest `GET …/output` answer (bytes). */
  outputReadBytes: number;
  /** Largest output frame, and largest read of a WebSocket follower (SSE events are smaller still). */
  chunkBytes: number;
  /**
   * Largest runtime read of an SSE follower of a busy stream, sent an event at a time. Reads never exceed what the
   * client's socket can take (`streamBufferBytes` less what it already holds).
   */
  followReadBytes: number;
  /** How long a follower waits for new output before checking status again. */
  pollMs: number;
  /** Interval of SSE heartbeat comments. */
  heartbeatMs: number;
  /**
   * Output bytes one streaming client (WebSocket or SSE) may hold in the server: what its socket has not taken yet
   * plus what was read for it and not yet sent. At the bound the gateway stops reading output for that client.
   */
  streamBufferBytes: number;
  /** How long a client may take nothing at the bound before it is closed (WebSocket 1013; SSE: the connection). */
  streamStallMs: number;
  /** Open WebSocket and SSE streams per token; one more is `too_many_streams` (429). */
  streamsPerToken: number;
  /** Largest client -> server WebSocket frame (stdin chunk). */
  wsMaxFrameBytes: number;
  /** Requests per second a member token is admitted on average (0: no bound); past it `rate_limited` (429). */
  requestsPerSecond: number;
  /** Requests a member token may send at once above that pace (the bucket's size). */
  requestBurst: number;
}

export const defaultLimits: GatewayLimits = {
  bodyBytes: 1024 * 1024,
  discardBytes: 64 * 1024 * 1024,
  discardMs: 30_000,
  closeLingerMs: 2_000,
  maxWaitMs: 60_000,
  outputReadBytes: 4 * 1024 * 1024,
  chunkBytes: 256 * 1024,
  followReadBytes: 256 * 1024,
  pollMs: 250,
  heartbeatMs: 15_000,
  streamBufferBytes: 512 * 1024,
  streamStallMs: 10_000,
  streamsPerToken: 32,
  wsMaxFrameBytes: 1024 * 1024,
  // Far above an agent's pace (a tool turn is a few requests), well below what two cores serve (several thousand).
  requestsPerSecond: 200,
  requestBurst: 1000,
};

const envLimits = {
  BERTH_MAX_STREAMS_PER_TOKEN: 'streamsPerToken',
  BERTH_STREAM_STALL_MS: 'streamStallMs',
  BERTH_BODY_DISCARD_MS: 'discardMs',
  BERTH_RATE_LIMIT: 'requestsPerSecond',
  BERTH_RATE_BURST: 'requestBurst',
} as const satisfies Record<string, keyof GatewayLimits>;

/** Limits an operator may turn off with 0. */
const mayBeOff = new Set<keyof GatewayLimits>(['requestsPerSecond']);

/**
 * The limits an operator sets through the environment (README Configuration); unset ones keep their defaults. A bad
 * value is `invalid_request` naming the variable, so `berth serve` stops before listening.
 */
export function gatewayLimitsFromEnv(env: NodeJS.ProcessEnv): Partial<GatewayLimits> {
  const limits: Partial<GatewayLimits> = {};
  const problems: string[] = [];
  for (const [name, key] of Object.entries(envLimits)) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const value = Number(raw);
    const least = mayBeOff.has(key) ? 0 : 1;
    if (Number.isSafeInteger(value) && value >= least) limits[key] = value;
    else problems.push(`${name}: must be an integer >= ${least}`);
  }
  if (problems.length > 0) throw new BerthError('invalid_request', `invalid configuration: ${problems.join('; ')}`, { problems });
  return limits;
}
