/** An error answered by a Berth server: the `{"error":{"code","message","detail"}}` body as a typed exception. */
import { errorBodySchema } from '../../schemas/api.ts';
import { errorCodes, type ErrorCode } from '../../schemas/errors.ts';

const parseJson = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
};

export class BerthApiError extends Error {
  readonly code: string;
  readonly status: number;
  readonly detail: Record<string, unknown>;

  constructor(status: number, code: string, message: string, detail: Record<string, unknown> = {}) {
    super(message);
    this.name = 'BerthApiError';
    this.status = status;
    this.code = code;
    this.detail = detail;
  }

  /** Worth retrying later with the same request (the server is unavailable or overloaded, or paces this token). */
  get retryable(): boolean {
    return this.status === 503 || this.status === 502 || this.status === 504 || this.code === 'rate_limited';
  }

  /** An error received inside an SSE or WebSocket stream, without an HTTP status: the registry gives it. */
  static fromCode(code: string, message: string, detail: Record<string, unknown> = {}): BerthApiError {
    return new BerthApiError(errorCodes[code as ErrorCode]?.status ?? 500, code, message, detail);
  }

  /** Builds the error from a status and body text; a body that is not the error shape still yields an error. */
  static fromBody(status: number, text: string): BerthApiError {
    const body = errorBodySchema.safeParse(parseJson(text));
    if (body.success) return new BerthApiError(status, body.data.error.code, body.data.error.message, body.data.error.detail);
    return new BerthApiError(status, status >= 500 ? 'internal' : 'invalid_request', `HTTP ${status}: ${text.slice(0, 200)}`);
  }
}

export const isBerthApiError = (e: unknown, code?: string): e is BerthApiError =>
  e instanceof BerthApiError && (code === undefined || e.code === code);
