// The worker status feed: GET /v1/agents/{id}/worker/status as server-sent events, read
// with fetch and a stream reader because EventSource cannot send the Authorization
// header (and the token must never go into the URL). The first event is the current
// state; the stream ends after an hour or when a replica shuts down, and the feed then
// reconnects with a growing, jittered delay. The feed only speeds the «Браузер агента»
// window up: a proxy may buffer the stream (no event ever arrives) or the API may refuse
// it (429: the per-user stream cap), and the window then relies on the view route alone.

/** StatusEvent is one `event: status` of the feed. */
export interface StatusEvent {
  agentId: string;
  sessionId?: string;
  status: 'running' | 'idle' | 'stopped';
  live: boolean;
}

export interface StatusFeedHandlers {
  onStatus(event: StatusEvent): void;
  /** The token was refused (401): the feed stops. */
  onUnauthorized(): void;
  /** The agent does not exist or is not visible to this person (404): the feed stops. */
  onNotFound(): void;
  /**
   * onDown: the feed delivers nothing now — the API refused the stream (429: this person
   * holds too many; 5xx), the request failed, or the stream ended. The feed reconnects on
   * its own; its next onStatus says it is back.
   */
  onDown(): void;
}

/** Reconnection delays: the first retry after about 1 s, doubling up to 30 s. */
const firstRetryMs = 1_000;
const maxRetryMs = 30_000;

export class StatusFeed {
  private readonly abort = new AbortController();
  private failures = 0;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly agentId: string,
    private readonly token: string,
    private readonly handlers: StatusFeedHandlers,
  ) {
    void this.connect();
  }

  /** close ends the stream and any pending reconnection. */
  close(): void {
    this.abort.abort();
    clearTimeout(this.retryTimer);
  }

  private async connect(): Promise<void> {
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
    } catch {
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
  private async read(body: ReadableStream<Uint8Array>): Promise<void> {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let event = 'message';
    let data: string[] = [];
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
          } else if (line.startsWith(':')) {
            // A comment (the keep-alive).
          } else {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') {
              event = value;
            } else if (field === 'data') {
              data.push(value);
            }
          }
        }
      }
    } finally {
      reader.releaseLock();
    }
  }

  private dispatch(json: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(json);
    } catch {
      return;
    }
    if (!isStatusEvent(parsed)) {
      return;
    }
    this.failures = 0;
    this.handlers.onStatus(parsed);
  }
}

function isStatusEvent(v: unknown): v is StatusEvent {
  if (typeof v !== 'object' || v === null) {
    return false;
  }
  const e = v as Record<string, unknown>;
  return (
    typeof e.agentId === 'string' &&
    (e.sessionId === undefined || typeof e.sessionId === 'string') &&
    (e.status === 'running' || e.status === 'idle' || e.status === 'stopped') &&
    typeof e.live === 'boolean'
  );
}
