// The one shape of every failure a call returns: `{ error: { code, message } }`, the
// API's error body. Failures that never produced an API answer get the same shape with a
// code of their own, so a caller reads `error.error.code` in every case and never meets a
// raw `TypeError`.

import type { ErrorBody } from './gen/types.gen.js';

/**
 * Codes the SDK itself puts in an error body (the API's own codes are `unauthenticated`,
 * `forbidden`, `not_found`, `rate_limited`, `unavailable`, …):
 *
 * - `network`: no answer arrived (DNS, refused or reset connection, TLS); `response` is
 *   undefined.
 * - `timeout`: the call's `signal` was an `AbortSignal.timeout()` that fired.
 * - `aborted`: the call's `signal` was aborted by the caller.
 * - `bad_response`: an answer arrived that is not the API's JSON (a proxy's HTML error
 *   page, a truncated body); `response` holds it.
 */
export type ClientErrorCode = 'network' | 'timeout' | 'aborted' | 'bad_response';

/** ClientError is an error body the SDK made, not the API. */
export type ClientError = { error: { code: ClientErrorCode; message: string } };

const clientCodes: ReadonlySet<string> = new Set<ClientErrorCode>(['network', 'timeout', 'aborted', 'bad_response']);

/** isClientError tells a failure of the call itself from an answer of the API. */
export function isClientError(error: ErrorBody | undefined): error is ClientError {
  return error !== undefined && clientCodes.has(error.error.code);
}

/** isErrorBody reports whether value has the shape `{ error: { code, message } }`. */
export function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== 'object' || value === null || !('error' in value)) {
    return false;
  }
  const inner = (value as { error: unknown }).error;
  return (
    typeof inner === 'object' &&
    inner !== null &&
    typeof (inner as { code?: unknown }).code === 'string' &&
    typeof (inner as { message?: unknown }).message === 'string'
  );
}

/**
 * ConfigurationError is thrown (not returned) for a call that cannot be made as
 * configured: no base URL, or one that is not an absolute http(s) URL. It is a mistake
 * in the program, not a condition to retry.
 */
export class ConfigurationError extends TypeError {
  override readonly name = 'ConfigurationError';
}

function clientError(code: ClientErrorCode, message: string): ClientError {
  return { error: { code, message } };
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error && cause.message ? `${err.message}: ${cause.message}` : err.message;
  }
  return String(err);
}

/**
 * toErrorBody turns whatever a failed call produced into the one error shape. It is the
 * error interceptor of every client of this package. A ConfigurationError is thrown on.
 */
export function toErrorBody(err: unknown, response: Response | undefined): ErrorBody {
  if (err instanceof ConfigurationError) {
    throw err;
  }
  if (response === undefined) {
    const name = (err as { name?: unknown } | null)?.name;
    if (name === 'TimeoutError') {
      return clientError('timeout', 'the request timed out before an answer arrived');
    }
    if (name === 'AbortError') {
      return clientError('aborted', 'the request was aborted');
    }
    return clientError('network', `no answer from the API: ${describe(err)}`);
  }
  if (isErrorBody(err)) {
    return err;
  }
  return clientError('bad_response', `HTTP ${response.status}: the answer is not the API's JSON (${describe(err).slice(0, 200)})`);
}
