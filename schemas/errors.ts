/**
 * The one registry of Berth's error codes: every typed error inside and every error body on the wire comes from here
 * (DESIGN §8). The README's error table is checked against `errorCodes` by a test.
 */
export const errorCodes = {
  invalid_request: { status: 400, retryable: false, meaning: 'The request body, query or path is malformed.' },
  environment_invalid: { status: 400, retryable: false, meaning: 'An environment name, path or archive member is not acceptable.' },
  unauthorized: { status: 401, retryable: false, meaning: 'No bearer token, or an unknown one.' },
  forbidden: { status: 403, retryable: false, meaning: 'The token is known but its role may not do this.' },
  not_found: { status: 404, retryable: false, meaning: 'The resource does not exist in the caller\'s scope.' },
  environment_not_found: { status: 404, retryable: false, meaning: 'The environment does not exist in the caller\'s scope.' },
  environment_exists: { status: 409, retryable: false, meaning: 'Another environment of the scope has that slug.' },
  environment_busy: { status: 409, retryable: true, meaning: 'An overlapping operation (build, provider call, release with uses) is under way.' },
  environment_not_ready: { status: 409, retryable: true, meaning: 'The environment has no active version, or the version is unfinished.' },
  operation_conflict: { status: 409, retryable: false, meaning: 'The operationId is taken by a different input.' },
  stale_target: { status: 409, retryable: true, meaning: 'The allocation generation named is no longer current.' },
  invalid_state: { status: 409, retryable: false, meaning: 'The resource is not in a state that accepts this request.' },
  owned_elsewhere: { status: 409, retryable: false, meaning: 'Another runtime sharing the event store owns the resource: detail.runtimeId names it and detail.url, when known, is where to send the request (the client follows it).' },
  wrong_expected_version: { status: 409, retryable: true, meaning: 'A concurrent writer changed the stream first.' },
  workspace_busy: { status: 409, retryable: true, meaning: 'Another holder owns the workspace storage.' },
  workspace_unavailable: { status: 409, retryable: false, meaning: 'The workspace\'s storage is gone, replaced, or no longer matches the binding recorded (generation, identity, deletion).' },
  stale_version: { status: 412, retryable: false, meaning: 'The file or workspace changed since the version named (If-Match, or a restore\'s expectedRevision), or the head moved while a checkpoint was taken; nothing was written.' },
  output_expired: { status: 410, retryable: false, meaning: 'The execution\'s output aged out under the retention policy; its record is kept.' },
  file_too_large: { status: 413, retryable: false, meaning: 'The file is over the limit given in detail.max_bytes.' },
  body_too_large: { status: 413, retryable: false, meaning: 'The request body is over the limit given in detail.max_bytes.' },
  quota_exceeded: { status: 429, retryable: true, meaning: 'A ceiling or quota of the caller\'s scope is reached; detail names the quota, its limit and use.' },
  storage_full: { status: 507, retryable: true, meaning: 'The data directory\'s filesystem is under the room kept for the event store (detail: freeBytes, reserveBytes): members\' writes are refused, and their running commands stopped, until space is freed.' },
  rate_limited: { status: 429, retryable: true, meaning: 'The token sent requests faster than its rate allows; nothing was done. detail.retry_after_ms (and the Retry-After header) says when the next one is admitted.' },
  too_many_streams: { status: 429, retryable: true, meaning: 'The token already holds the most concurrent output and event streams it may.' },
  provider_missing: { status: 422, retryable: false, meaning: 'The profile names a provider that is not registered.' },
  corrupt_event: { status: 500, retryable: false, meaning: 'A stored event cannot be decoded; detail names its stream and revision.' },
  projection_failed: { status: 503, retryable: false, meaning: 'A read model failed on an event and answers nothing until it is rebuilt (POST /v1/projections/{name}/rebuild); detail names the projection and the position.' },
  internal: { status: 500, retryable: false, meaning: 'An unexpected fault; the server keeps serving.' },
  unavailable: { status: 503, retryable: true, meaning: 'A dependency (Docker daemon, event store) cannot be reached.' },
  provider_unavailable: { status: 503, retryable: true, meaning: 'The environment\'s provider (e.g. the Docker engine) does not answer; nothing was started.' },
} as const;

export type ErrorCode = keyof typeof errorCodes;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; detail: Record<string, unknown> };
}

/** A typed Berth error: stable code, human message, structured detail. */
export class BerthError extends Error {
  readonly code: ErrorCode;
  readonly detail: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, detail: Record<string, unknown> = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BerthError';
    this.code = code;
    this.detail = detail;
  }

  get status(): number {
    return errorCodes[this.code].status;
  }

  toBody(): ErrorBody {
    return { error: { code: this.code, message: this.message, detail: this.detail } };
  }
}

export const isBerthError = (e: unknown, code?: ErrorCode): e is BerthError =>
  e instanceof BerthError && (code === undefined || e.code === code);
