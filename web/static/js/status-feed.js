// The worker status feed: GET /v1/agents/{id}/worker/status as server-sent events, read
// with fetch and a stream reader because EventSource cannot send the Authorization
// header (and the token must never go into the URL). The first event is the current
// state; the stream ends after an hour or when a replica shuts down, and the feed then
// reconnects with a growing, jittered delay. The feed only speeds the «Браузер агента»
// window up: a proxy may buffer the stream (no event ever arrives) or the API may refuse
// it (429: the per-user stream cap), and the window then relies on the view route alone.
/** Reconnection delays: the first retry after about 1 s, doubling up to 30 s. */
const firstRetryMs = 1_000;
const maxRetryMs = 30_000;
export class StatusFeed {
    agentId;
    token;
    handlers;
    abort = new AbortController();
    failures = 0;
    retryTimer;
    constructor(agentId, token, handlers) {
        this.agentId = agentId;
        this.token = token;
        this.handlers = handlers;
        void this.connect();
    }
    /** close ends the stream and any pending reconnection. */
    close() {
        this.abort.abort();
        clearTimeout(this.retryTimer);
    }
    async connect() {
        const signal = this.abort.signal;
        try {
            const response = await fetch(`/v1/agents/${encodeURIComponent(this.agentId)}/worker/status`, {
                headers: { Authorization: `Bearer ${this.token}`, Accept: 'text/event-stream' },
                cache: 'no-store',
                signal,
            });
            if (response.status === 401) {
                this.handlers.onUnauthorized();
                return;
            }
            if (response.status === 404) {
                this.handlers.onNotFound();
                return;
            }
            if (response.ok && response.body) {
                await this.read(response.body);
            }
        }
        catch {
            // A network failure or the end of a stream: reconnect below.
        }
        if (signal.aborted) {
            return;
        }
        this.handlers.onDown();
        const delay = Math.min(maxRetryMs, firstRetryMs * 2 ** this.failures) * (0.8 + 0.4 * Math.random());
        this.failures++;
        this.retryTimer = setTimeout(() => void this.connect(), delay);
    }
    /** read parses the event stream until it ends (text/event-stream, WHATWG HTML §9.2). */
    async read(body) {
        const reader = body.getReader();
        const decoder = new TextDecoder();
        let buffer = '';
        let event = 'message';
        let data = [];
        try {
            for (;;) {
                const { value, done } = await reader.read();
                if (done) {
                    return;
                }
                buffer += decoder.decode(value, { stream: true });
                const lines = buffer.split(/\r\n|\r|\n/);
                buffer = lines.pop() ?? '';
                for (const line of lines) {
                    if (line === '') {
                        if (event === 'status' && data.length > 0) {
                            this.dispatch(data.join('\n'));
                        }
                        event = 'message';
                        data = [];
                    }
                    else if (line.startsWith(':')) {
                        // A comment (the keep-alive).
                    }
                    else {
                        const colon = line.indexOf(':');
                        const field = colon < 0 ? line : line.slice(0, colon);
                        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
                        if (field === 'event') {
                            event = value;
                        }
                        else if (field === 'data') {
                            data.push(value);
                        }
                    }
                }
            }
        }
        finally {
            reader.releaseLock();
        }
    }
    dispatch(json) {
        let parsed;
        try {
            parsed = JSON.parse(json);
        }
        catch {
            return;
        }
        if (!isStatusEvent(parsed)) {
            return;
        }
        this.failures = 0;
        this.handlers.onStatus(parsed);
    }
}
function isStatusEvent(v) {
    if (typeof v !== 'object' || v === null) {
        return false;
    }
    const e = v;
    return (typeof e.agentId === 'string' &&
        (e.sessionId === undefined || typeof e.sessionId === 'string') &&
        (e.status === 'running' || e.status === 'idle' || e.status === 'stopped') &&
        typeof e.live === 'boolean');
}
