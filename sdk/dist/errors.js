// The one shape of every failure a call returns: `{ error: { code, message } }`, the
// API's error body. Failures that never produced an API answer get the same shape with a
// code of their own, so a caller reads `error.error.code` in every case and never meets a
// raw `TypeError`.
const clientCodes = new Set(['network', 'timeout', 'aborted', 'bad_response']);
/** isClientError tells a failure of the call itself from an answer of the API. */
export function isClientError(error) {
    return error !== undefined && clientCodes.has(error.error.code);
}
/** isErrorBody reports whether value has the shape `{ error: { code, message } }`. */
export function isErrorBody(value) {
    if (typeof value !== 'object' || value === null || !('error' in value)) {
        return false;
    }
    const inner = value.error;
    return (typeof inner === 'object' &&
        inner !== null &&
        typeof inner.code === 'string' &&
        typeof inner.message === 'string');
}
/**
 * ConfigurationError is thrown (not returned) for a call that cannot be made as
 * configured: no base URL, or one that is not an absolute http(s) URL. It is a mistake
 * in the program, not a condition to retry.
 */
export class ConfigurationError extends TypeError {
    name = 'ConfigurationError';
}
function clientError(code, message) {
    return { error: { code, message } };
}
function describe(err) {
    if (err instanceof Error) {
        const cause = err.cause;
        return cause instanceof Error && cause.message ? `${err.message}: ${cause.message}` : err.message;
    }
    return String(err);
}
/**
 * toErrorBody turns whatever a failed call produced into the one error shape. It is the
 * error interceptor of every client of this package. A ConfigurationError is thrown on.
 */
export function toErrorBody(err, response) {
    if (err instanceof ConfigurationError) {
        throw err;
    }
    if (response === undefined) {
        const name = err?.name;
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
