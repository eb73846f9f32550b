// The collapsible «Браузер агента» window: a snapshot of the agent's browser, polled
// through the generated SDK.
//
// Rules (SPEC §9): a frame is requested every 5 s (± 0.5 s of jitter, and after a 429 the
// 2 s it asked for on top, so that two viewers never stay in step: poll.ts), and only while the window is expanded, the document is
// visible and the status feed says the session is alive; never two requests at once;
// when the window becomes eligible again it asks at once, but never sooner than 3 s
// after the previous request (the API's pace per caller and agent). A new JPEG
// replaces the old one only after it decoded, so the picture never flashes blank. 429,
// 503 and network failures keep the last frame, say the view is temporarily unavailable
// and retry at the normal interval. Only `{"live":false}` (or a stopped session on the
// feed) means «Браузер закрыт»; the feed reporting a new session wakes the window up.
import { WorkerView } from '../../sdk/src/index.js';
import { formatAge } from './age.js';
import { el, uniqueId } from './dom.js';
import { callerPaceMs, nextPollDelay, retryAfterMs } from './poll.js';
/** What the window says instead of a picture, and a line of explanation. */
const placeholders = {
    connecting: ['Подключаемся к агенту…', ''],
    waiting: ['Ждём снимок экрана…', ''],
    noTab: ['Нет открытых вкладок', 'Браузер агента работает, но ни одна страница не открыта.'],
    closed: ['Браузер закрыт', 'Снимки появятся снова, когда у агента начнётся новая сессия.'],
    notFound: ['Агент не найден', 'Такого агента нет или он принадлежит другой команде.'],
};
const sessionStatus = {
    running: 'работает',
    idle: 'ожидает',
    stopped: 'остановлена',
};
export class BrowserWindow {
    options;
    /** element is the window's <section>, to be placed by the screen. */
    element;
    toggle;
    body;
    session;
    notice;
    image;
    placeholder;
    placeholderText;
    placeholderHint;
    caption;
    pageTitle;
    pageUrl;
    age;
    expanded = true;
    display = 'connecting';
    feed;
    /** closedSession is the session the view answered `{"live":false}` for. */
    closedSession;
    disposed = false;
    inFlight = false;
    /** wasEligible is eligible() as refresh last saw it. */
    wasEligible = false;
    /**
     * resumeSoon is set when frames became wanted again while a request was in flight:
     * the next one then goes as soon as the API's pace allows, not after the normal interval.
     */
    resumeSoon = false;
    /** lastStart is the performance.now() of the last request. */
    lastStart = -Infinity;
    pollTimer;
    ageTimer;
    /** frameUrl is the blob: URL on screen, revoked when replaced. */
    frameUrl;
    capturedAt = 0;
    onVisibility = () => this.refresh();
    constructor(options) {
        this.options = options;
        const headingId = uniqueId('browser-heading');
        const bodyId = uniqueId('browser-body');
        this.toggle = el('button', { type: 'button', class: 'bw-toggle', 'aria-expanded': 'true', 'aria-controls': bodyId }, 'Браузер агента');
        this.session = el('p', { class: 'bw-session' });
        this.notice = el('p', { class: 'bw-notice', role: 'status' });
        this.image = el('img', { class: 'bw-image', alt: '', hidden: true });
        this.placeholderText = el('strong', {}, placeholders.connecting[0]);
        this.placeholderHint = el('span', { class: 'hint' });
        this.placeholder = el('p', { class: 'bw-placeholder', 'aria-live': 'polite' }, this.placeholderText, this.placeholderHint);
        this.pageTitle = el('span', { class: 'bw-page-title' });
        this.pageUrl = el('span', { class: 'bw-page-url', translate: 'no' });
        this.age = el('time', { class: 'bw-age' });
        this.caption = el('figcaption', { class: 'bw-caption', hidden: true }, this.pageTitle, this.pageUrl, this.age);
        this.body = el('div', { id: bodyId, class: 'bw-body' }, this.session, this.notice, el('figure', { class: 'bw-frame' }, el('div', { class: 'bw-screen' }, this.image, this.placeholder), this.caption));
        this.element = el('section', { class: 'browser-window', 'aria-labelledby': headingId }, el('h2', { id: headingId, class: 'bw-heading' }, this.toggle), this.body);
        this.toggle.addEventListener('click', () => this.setExpanded(!this.expanded));
        document.addEventListener('visibilitychange', this.onVisibility);
    }
    /** setStatus takes an event of the status feed. */
    setStatus(event) {
        this.feed = event;
        this.session.textContent = `Сессия агента: ${sessionStatus[event.status]}`;
        if (this.display === 'notFound') {
            return;
        }
        if (!event.live) {
            this.clearFrame('closed');
        }
        else if (event.sessionId !== this.closedSession && (this.display === 'connecting' || this.display === 'closed')) {
            this.show('waiting');
        }
        this.refresh();
    }
    /** setNotFound shows that the agent does not exist or is hidden from this person. */
    setNotFound() {
        this.clearFrame('notFound');
        this.session.textContent = '';
        this.refresh();
    }
    /** dispose stops every timer and listener and frees the frame. */
    dispose() {
        this.disposed = true;
        clearTimeout(this.pollTimer);
        clearInterval(this.ageTimer);
        document.removeEventListener('visibilitychange', this.onVisibility);
        if (this.frameUrl) {
            URL.revokeObjectURL(this.frameUrl);
        }
    }
    setExpanded(expanded) {
        this.expanded = expanded;
        this.toggle.setAttribute('aria-expanded', String(expanded));
        this.body.hidden = !expanded;
        this.refresh();
    }
    /** eligible tells whether frames may be requested now. */
    eligible() {
        return (!this.disposed &&
            this.expanded &&
            document.visibilityState === 'visible' &&
            this.display !== 'notFound' &&
            this.feed !== undefined &&
            this.feed.live &&
            this.feed.sessionId !== this.closedSession);
    }
    /**
     * refresh follows a change of eligibility: it cancels the timer when frames are not
     * wanted, and when they are wanted again it asks as soon as the gate allows.
     */
    refresh() {
        this.syncAgeTimer();
        const eligible = this.eligible();
        const woke = eligible && !this.wasEligible;
        this.wasEligible = eligible;
        if (!eligible) {
            clearTimeout(this.pollTimer);
            this.pollTimer = undefined;
            return;
        }
        if (woke && this.inFlight) {
            this.resumeSoon = true;
        }
        if (!this.inFlight && this.pollTimer === undefined) {
            this.schedule(this.lastStart + callerPaceMs);
        }
    }
    /** schedule sets the one poll timer to fire at the performance.now() time `at`. */
    schedule(at) {
        clearTimeout(this.pollTimer);
        this.pollTimer = setTimeout(() => {
            this.pollTimer = undefined;
            void this.poll();
        }, Math.max(0, at - performance.now()));
    }
    async poll() {
        if (!this.eligible() || this.inFlight) {
            return;
        }
        this.inFlight = true;
        this.lastStart = performance.now();
        const session = this.feed?.sessionId;
        let backOff = 0;
        try {
            const { data, response } = await WorkerView.getAgentWorkerView({
                path: { id: this.options.agentId },
                baseUrl: location.origin,
                auth: this.options.token,
                cache: 'no-store',
            });
            backOff = retryAfterMs(response);
            if (!this.disposed && this.display !== 'notFound' && this.feed?.live === true) {
                // (A reply that arrives after the feed said the session stopped is stale.)
                if (data !== undefined) {
                    await this.showView(data, session);
                }
                else {
                    this.showFailure(response?.status);
                }
            }
        }
        catch {
            // A frame that did not decode: as unavailable as a 503.
            if (!this.disposed) {
                this.showFailure(undefined);
            }
        }
        finally {
            this.inFlight = false;
        }
        const soon = this.resumeSoon;
        this.resumeSoon = false;
        if (this.eligible()) {
            this.schedule(this.lastStart + (soon ? callerPaceMs : nextPollDelay(backOff)));
        }
    }
    async showView(view, session) {
        if (!view.live) {
            // The feed will report the stop too; until it reports a new session, stay closed.
            this.closedSession = session;
            this.clearFrame('closed');
        }
        else if (view.page === null) {
            this.clearFrame('noTab');
        }
        else {
            await this.swapFrame(view.page);
        }
        this.notice.textContent = '';
    }
    showFailure(status) {
        if (status === 401) {
            this.options.onUnauthorized();
            return;
        }
        if (status === 404) {
            this.setNotFound();
            return;
        }
        // 429, 503, a network failure: keep whatever is shown and try again at the normal
        // interval. This is never a closed browser.
        this.notice.textContent =
            this.display === 'frame'
                ? 'Просмотр временно недоступен: показан последний снимок. Повторим через 5 с.'
                : 'Просмотр временно недоступен. Повторим через 5 с.';
    }
    /** swapFrame decodes the JPEG in a detached image and only then shows it. */
    async swapFrame(page) {
        const bytes = Uint8Array.from(atob(page.data), (c) => c.charCodeAt(0));
        const url = URL.createObjectURL(new Blob([bytes], { type: page.contentType }));
        const decoded = new Image();
        decoded.src = url;
        try {
            await decoded.decode();
        }
        catch (err) {
            URL.revokeObjectURL(url);
            throw err;
        }
        if (this.disposed) {
            URL.revokeObjectURL(url);
            return;
        }
        // The decoded image is in the document's list of available images, so the visible
        // element switches to it at once, without a blank frame.
        this.image.src = url;
        this.image.alt = `Снимок вкладки «${page.title}»`;
        this.image.hidden = false;
        if (this.frameUrl) {
            URL.revokeObjectURL(this.frameUrl);
        }
        this.frameUrl = url;
        this.pageTitle.textContent = page.title || 'Без названия';
        this.pageUrl.textContent = page.url;
        this.age.dateTime = page.capturedAt;
        this.capturedAt = Date.parse(page.capturedAt);
        this.show('frame');
        this.updateAge();
    }
    /** clearFrame removes the picture and shows a message in its place. */
    clearFrame(display) {
        this.image.hidden = true;
        this.image.removeAttribute('src');
        this.image.alt = '';
        if (this.frameUrl) {
            URL.revokeObjectURL(this.frameUrl);
            this.frameUrl = undefined;
        }
        this.notice.textContent = '';
        this.show(display);
    }
    show(display) {
        this.display = display;
        const frame = display === 'frame';
        this.caption.hidden = !frame;
        this.placeholder.hidden = frame;
        if (!frame) {
            [this.placeholderText.textContent, this.placeholderHint.textContent] = placeholders[display];
        }
        this.syncAgeTimer();
    }
    /** syncAgeTimer ticks the frame's age every second, only while someone can see it. */
    syncAgeTimer() {
        const wanted = !this.disposed && this.display === 'frame' && this.expanded && document.visibilityState === 'visible';
        if (wanted && this.ageTimer === undefined) {
            this.updateAge();
            this.ageTimer = setInterval(() => this.updateAge(), 1_000);
        }
        else if (!wanted && this.ageTimer !== undefined) {
            clearInterval(this.ageTimer);
            this.ageTimer = undefined;
        }
    }
    updateAge() {
        this.age.textContent = `Снимок сделан ${formatAge(Date.now() - this.capturedAt)}`;
    }
}
