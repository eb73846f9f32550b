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
export type ClientError = {
    error: {
        code: ClientErrorCode;
        message: string;
    };
};
/** isClientError tells a failure of the call itself from an answer of the API. */
export declare function isClientError(error: ErrorBody | undefined): error is ClientError;
/** isErrorBody reports whether value has the shape `{ error: { code, message } }`. */
export declare function isErrorBody(value: unknown): value is ErrorBody;
/**
 * ConfigurationError is thrown (not returned) for a call that cannot be made as
 * configured: no base URL, or one that is not an absolute http(s) URL. It is a mistake
 * in the program, not a condition to retry.
 */
export declare class ConfigurationError extends TypeError {
    readonly name = "ConfigurationError";
}
/**
 * toErrorBody turns whatever a failed call produced into the one error shape. It is the
 * error interceptor of every client of this package. A ConfigurationError is thrown on.
 */
export declare function toErrorBody(err: unknown, response: Response | undefined): ErrorBody;
