/**
 * Typed errors: one class per error code of the API (RFC 10.2), chosen by the code of the
 * body `{"error": {"code", "message", "details"}}` first, then by the status; the same
 * classes as the Python SDK's, named with an `Error` suffix.
 */
import type { components } from "./schema.js";
import type { OperationView } from "./types.js";

/** One entry of an error's `details`: the field, by its path (`content.subject`), and what is wrong. */
export type ErrorDetail = components["schemas"]["ErrorDetail"];

/** Any failure the server answered with, or a request that never got an answer. */
export class MembraneError extends Error {
  /** The API's error code (`invalid_input`, `not_found`, ...). */
  readonly code: string;
  /** The HTTP status; 0 when no answer arrived. */
  readonly status: number;
  readonly details: ErrorDetail[];
  /** The server's `Retry-After`, in milliseconds, when it sent one (429, 503). */
  readonly retryAfterMs: number | undefined;

  constructor(code: string, status: number, message: string, details: ErrorDetail[] = [],
              options: { retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.details = details;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** 400: a request the server could not read. */
export class BadRequestError extends MembraneError {}
/** 422: invalid input; `details` names each bad field. */
export class InvalidInputError extends MembraneError {}
/** 413: a body or a JSON budget (RFC 2.4) is too large. */
export class PayloadTooLargeError extends MembraneError {}
/** 413: a record over its size budget. */
export class RecordTooLargeError extends MembraneError {}
/** 401: a missing or unknown API key. */
export class UnauthorizedError extends MembraneError {}
/** 403: a request beyond the key's policy (RFC 7.2). */
export class ForbiddenError extends MembraneError {}
/** 404: unknown, or not visible to this key. */
export class NotFoundError extends MembraneError {}
/** 409: the request conflicts with the current state. */
export class ConflictError extends MembraneError {}
/** 409: an `Idempotency-Key` reused with another body (RFC 9.2). */
export class IdempotencyConflictError extends ConflictError {}
/** 409: a revision the record's state refuses (RFC 5.2). */
export class RevisionRefusedError extends ConflictError {}
/** 409: a fact that was deleted and may not come back (RFC 5.4). */
export class TombstonedFactError extends ConflictError {}
/** 429: too many requests; retried after `Retry-After`. */
export class RateLimitedError extends MembraneError {}
/** 503: Postgres or the broker is unavailable (RFC 10.5); retried after `Retry-After`. */
export class UnavailableError extends MembraneError {}
/**
 * 503: a sealed record's key is not in the server's key ring (RFC 7.6). The request is right
 * and the data intact, but only the operator can supply the key: never retried.
 */
export class EncryptionKeyUnavailableError extends UnavailableError {}
/** A 5xx other than 503: a bug in the server. */
export class ServerError extends MembraneError {}
/** No answer: the connection failed or the request timed out (status 0). */
export class ConnectionFailedError extends MembraneError {}
/** An operation did not finish within `wait`'s timeout (status 0). */
export class OperationTimeoutError extends MembraneError {
  /** The operation as last seen. */
  readonly operation: OperationView;

  constructor(message: string, operation: OperationView) {
    super("operation_timeout", 0, message);
    this.operation = operation;
  }
}

type ErrorClass = new (code: string, status: number, message: string, details?: ErrorDetail[],
                       options?: { retryAfterMs?: number }) => MembraneError;

const BY_CODE: Record<string, ErrorClass> = {
  bad_request: BadRequestError,
  invalid_input: InvalidInputError,
  payload_too_large: PayloadTooLargeError,
  record_too_large: RecordTooLargeError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  idempotency_conflict: IdempotencyConflictError,
  revision_refused: RevisionRefusedError,
  tombstoned_fact: TombstonedFactError,
  rate_limited: RateLimitedError,
  too_many_requests: RateLimitedError,
  unavailable: UnavailableError,
  encryption_key_unavailable: EncryptionKeyUnavailableError,
  internal: ServerError,
};

// A code this client does not know yet still gets the class of its status.
const BY_STATUS: Record<number, ErrorClass> = {
  400: BadRequestError, 401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError,
  409: ConflictError, 413: PayloadTooLargeError, 422: InvalidInputError, 429: RateLimitedError,
  503: UnavailableError,
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The typed error for an answer of `status` whose body is `body`: the whole answer
 * (`{"error": {...}}`), the error object itself (a failed operation's `error`), or anything
 * else (a proxy's page), when only the status decides.
 */
export function errorFromBody(status: number, body: unknown, retryAfterMs?: number): MembraneError {
  const inner = isObject(body) && "error" in body ? body.error : body;
  const error = isObject(inner) ? inner : undefined;
  const code = typeof error?.code === "string" ? error.code : `http_${status}`;
  const message = typeof error?.message === "string" ? error.message
    : `HTTP ${status}${typeof body === "string" && body ? `: ${body.slice(0, 200)}` : ""}`;
  const details = Array.isArray(error?.details) ? (error.details as ErrorDetail[]) : [];
  const cls = BY_CODE[code] ?? BY_STATUS[status] ?? (status >= 500 ? ServerError : MembraneError);
  return new cls(code, status, message, details, { retryAfterMs });
}
