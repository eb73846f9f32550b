// The collapsible «Браузер агента» window: a snapshot of the agent's browser, polled with
// the SDK's watchWorkerView (every 5 s ± 0.5 s, a 429's Retry-After on top, the last
// frame kept on 429/503/failures, the end on {"live":false}).
//
// Rules (SPEC §9): frames are asked for only while the window is expanded, the document
// is visible and the session is alive; the watch is aborted as soon as one of these stops
// holding, and a new one waits for the API's 3-s pace after the previous request. From
// a session's first moment a watch asks every 5 s ± 0.5 s, also while it waits for the
// session's first tab (the seed: "requests a frame every five seconds"). A new
// JPEG replaces the old one only after it decoded, so the picture never flashes blank.
// Only `{"live":false}` (or a stopped session on the feed) means «Браузер закрыт»; the
// feed reporting a new session wakes the window up, and until that session shows a tab
// the window says «Ждём снимок экрана…».
//
// An answer is about the session the feed named when its request was sent: once the feed
// names another one, the answers still on their way are the old session's and are
// dropped (say, the `{"live":false}` of a session that stopped while the feed was away,
// which must not close the session the feed has just announced).
//
// The frame's title, URL and age sit above it; when the broker masked secret regions of
// the frame, «Часть страницы скрыта» lies over its top corner, and when it masked the
// whole frame (page.hidden), why lies over its middle instead. A click (or Enter) opens
// it at full size, Esc closes it.
//
// The status feed only speeds things up: the view route alone says whether the agent is
// live. While the feed works (it delivered an event on its current connection), it says
// when to start and stop asking, as above. When it has said nothing within 3 s of the
// window's start (a proxy that buffers server-sent events), or was refused (429: the
// per-user stream cap) or failed, the window asks the view route anyway, and after
// «Браузер закрыт» it keeps asking every 20 s ± 2 s, so that a new session is found
// without the feed.
import { watchWorkerView } from '@agentfy/sdk';
import { formatAge } from './age.js';
import { el, uniqueId } from './dom.js';
/** What the window says instead of a picture, and a line of explanation. */
const placeholders = {
    connecting: ['Подключаемся к агенту…', ''],
    waiting: ['Ждём снимок экрана…', 'Сессия агента началась; снимок появится, как только откроется вкладка.'],
    noTab: ['Нет открытых вкладок', 'Браузер агента работает, но ни одна страница не открыта.'],
    closed: ['Браузер закрыт', 'Снимки появятся снова, когда у агента начнётся новая сессия.'],
    notFound: ['Агент не найден', 'Такого агента нет или он принадлежит другой команде.'],
};
/** maskedTitle explains «Часть страницы скрыта», a frame with secret regions masked. */
const maskedTitle = 'На снимке закрыты поля паролей, платёжных данных и одноразовых кодов, а также области, которые сайт помечает как приватные.';
/**
 * hiddenReasons is what the window says over a frame the broker masked whole, by the
 * page's hidden (the API's reasons); hiddenOther is for a reason a later API may add.
 */
const hiddenReasons = {
    motion: 'Кадр скрыт целиком: страница двигалась так, что секреты нельзя было закрыть по отдельности',
    changed: 'Кадр скрыт целиком: поле с секретом появилось или исчезло во время снимка',
    view_transition: 'Кадр скрыт целиком: на странице шёл переход между видами',
    ink: 'Кадр скрыт целиком: секрет отрисован так, что его нельзя закрыть отдельно',
};
const hiddenOther = 'Кадр скрыт целиком, чтобы не показать секреты';
/** hiddenText is what the window says over a frame the broker masked whole for reason. */
function hiddenText(reason) {
    // Own keys only: a reason such as "constructor" is unknown, not Object's.
    return Object.hasOwn(hiddenReasons, reason) ? hiddenReasons[reason] : hiddenOther;
}
const sessionStatus = {
    running: 'работает',
    idle: 'ожидает',
    stopped: 'остановлена',
};
/**
 * feedSilenceMs is how long the window waits for the status feed's first event before it
 * asks the view route without it.
 */
const feedSilenceMs = 3_000;
/**
 * closedRecheckMs ± closedRecheckJitterMs is the wait between two view requests after
 * «Браузер закрыт» while the feed is down: the only way to see a new session then. A view
 * of an agent with no session takes no window of the API's gate and no pace.
 */
const closedRecheckMs = 20_000;
const closedRecheckJitterMs = 2_000;
/**
 * waitForTabMs is how long after a new session starts an answer «no tab» still reads as
 * «waiting for the first frame» (the worker opens its first tab within seconds).
 */
const waitForTabMs = 20_000;
export class BrowserWindow {
    options;
    /** element is the window's <section>, to be placed by the screen. */
    element;
    toggle;
    body;
    session;
    notice;
    open;
    image;
    placeholder;
    placeholderText;
    placeholderHint;
    caption;
    pageTitle;
    pageUrl;
    age;
    /**
     * masked says that the broker painted over secret regions of the frame (page.masked > 0),
     * or, with the class bw-masked-whole, over the whole frame and why (page.hidden).
     */
    masked;
    hint;
    dialog;
    dialogImage;
    dialogTitle;
    expanded = true;
    display = 'connecting';
    /** feed is the status feed's last event; feedState says whether it still holds. */
    feed;
    feedState = 'pending';
    /** feedSilence turns a feed that said nothing for feedSilenceMs 'down'. */
    feedSilence;
    /** recheckAt is the Date.now() at which a closed window asks again while the feed is down. */
    recheckAt = 0;
    recheckTimer;
    /** sessionLine is whether the session line says the session is live; undefined when it is empty. */
    sessionLine;
    /** closedSession is the session the view answered `{"live":false}` for. */
    closedSession;
    /**
     * generation counts the sessions the feed has named: it moves on each time an event
     * names a session other than the previous event's. A view request belongs to the
     * generation in which it was sent, and its answer counts only in that one.
     */
    generation = 0;
    /** waitingSince is the Date.now() at which the window began to wait for a new session's first frame. */
    waitingSince = 0;
    disposed = false;
    /** watch aborts the running watchWorkerView; undefined when none runs. */
    watch;
    /** lastRequestAt is the Date.now() of the last view request, for the API's pace. */
    lastRequestAt;
    /** unavailable is set while the last answer was a failure (the notice shows). */
    unavailable = false;
    /**
     * signInDown is set while that failure is the API's 503 identity_unavailable: the
     * sign-in service does not answer, so the token could not be checked. The user stays
     * signed in (only a 401 signs out) and the window says so.
     */
    signInDown = false;
    /** nextAt is the Date.now() of the next request (for the countdown). */
    nextAt = 0;
    ticker;
    /** frameUrl is the blob: URL on screen, revoked when replaced. */
    frameUrl;
    capturedAt = 0;
    onVisibility = () => this.refresh();
    constructor(options) {
        this.options = options;
        const headingId = uniqueId('browser-heading');
        const bodyId = uniqueId('browser-body');
        const dialogTitleId = uniqueId('browser-dialog-title');
        this.toggle = el('button', { type: 'button', class: 'bw-toggle', 'aria-expanded': 'true', 'aria-controls': bodyId }, 'Браузер агента');
        this.session = el('p', { class: 'bw-session' });
        this.notice = el('p', { class: 'bw-notice', role: 'status' });
        this.image = el('img', { class: 'bw-image', alt: '' });
        this.open = el('button', { type: 'button', class: 'bw-open', hidden: true, title: 'Открыть в полном размере' }, this.image);
        this.placeholderText = el('strong', {}, placeholders.connecting[0]);
        this.placeholderHint = el('span', { class: 'hint' });
        this.placeholder = el('p', { class: 'bw-placeholder', 'aria-live': 'polite' }, this.placeholderText, this.placeholderHint);
        this.pageTitle = el('span', { class: 'bw-page-title' });
        this.pageUrl = el('span', { class: 'bw-page-url', translate: 'no' });
        this.age = el('time', { class: 'bw-age' });
        this.masked = el('span', { class: 'bw-masked', hidden: true, title: maskedTitle }, 'Часть страницы скрыта');
        this.caption = el('figcaption', { class: 'bw-caption', hidden: true }, this.pageTitle, this.pageUrl, this.age);
        this.hint = el('p', { class: 'hint bw-hint' }, 'Снимок обновляется каждые 5 секунд, пока окно развёрнуто и вкладка открыта. Нажмите на снимок, чтобы открыть его в полном размере.');
        this.dialogImage = el('img', { class: 'bw-dialog-image', alt: '' });
        this.dialogTitle = el('h2', { id: dialogTitleId, class: 'bw-dialog-title' });
        const close = el('button', { type: 'button', class: 'secondary' }, 'Закрыть');
        this.dialog = el('dialog', { class: 'bw-dialog', 'aria-labelledby': dialogTitleId }, el('div', { class: 'bw-dialog-bar' }, this.dialogTitle, close), el('div', { class: 'bw-dialog-scroll' }, this.dialogImage));
        this.body = el('div', { id: bodyId, class: 'bw-body' }, this.session, el('figure', { class: 'bw-frame' }, this.caption, el('div', { class: 'bw-screen' }, this.open, this.masked, this.placeholder, this.notice)), this.hint);
        this.element = el('section', { class: 'browser-window', 'aria-labelledby': headingId }, el('h2', { id: headingId, class: 'bw-heading' }, this.toggle), this.body, this.dialog);
        this.toggle.addEventListener('click', () => this.setExpanded(!this.expanded));
        this.open.addEventListener('click', () => this.openFull());
        close.addEventListener('click', () => this.dialog.close());
        // A click on the backdrop (outside the dialog's box) closes it too.
        this.dialog.addEventListener('click', (event) => {
            if (event.target === this.dialog) {
                this.dialog.close();
            }
        });
        document.addEventListener('visibilitychange', this.onVisibility);
        this.feedSilence = setTimeout(() => {
            if (this.feedState === 'pending') {
                this.setFeedDown();
            }
        }, feedSilenceMs);
    }
    /** setStatus takes an event of the status feed. */
    setStatus(event) {
        const previous = this.feed;
        // While the feed was down, the view route may have shown a session the feed missed.
        const resumed = this.feedState === 'down';
        if (event.sessionId !== previous?.sessionId) {
            // Answers to the requests sent before this event are about another session.
            this.generation++;
        }
        this.feed = event;
        this.feedState = 'up';
        clearTimeout(this.feedSilence);
        this.session.textContent = `Сессия агента: ${sessionStatus[event.status]}`;
        this.sessionLine = event.live;
        if (this.display === 'notFound') {
            return;
        }
        if (!event.live) {
            this.clearFrame('closed');
        }
        else if (event.sessionId !== this.closedSession) {
            if (previous !== undefined && previous.sessionId !== event.sessionId && !(resumed && this.display === 'frame')) {
                // A new session: its worker opens a tab within seconds; until then, «waiting».
                this.clearFrame('waiting');
                this.waitingSince = Date.now();
            }
            else if (this.display === 'connecting' || this.display === 'closed') {
                this.show('waiting');
            }
        }
        this.refresh();
    }
    /**
     * setFeedDown says the status feed delivers nothing now (refused, failed, ended, or
     * silent since the start): the window asks the view route without it until the feed's
     * next event.
     */
    setFeedDown() {
        if (this.feedState === 'down') {
            return;
        }
        this.feedState = 'down';
        clearTimeout(this.feedSilence);
        this.refresh();
    }
    /** setNotFound shows that the agent does not exist or is hidden from this person. */
    setNotFound() {
        this.clearFrame('notFound');
        this.session.textContent = '';
        this.sessionLine = undefined;
        this.hint.hidden = true;
        this.refresh();
    }
    /** dispose stops the watch, every timer and listener, and frees the frame. */
    dispose() {
        this.disposed = true;
        this.watch?.abort();
        clearInterval(this.ticker);
        clearTimeout(this.feedSilence);
        clearTimeout(this.recheckTimer);
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
        if (this.disposed || !this.expanded || document.visibilityState !== 'visible' || this.display === 'notFound') {
            return false;
        }
        switch (this.feedState) {
            case 'pending':
                return false;
            case 'up':
                return this.feed !== undefined && this.feed.live && this.feed.sessionId !== this.closedSession;
            case 'down':
                // The view route alone says whether the agent is live; once it said no, ask it
                // again at the slower pace.
                return this.display !== 'closed' || Date.now() >= this.recheckAt;
        }
    }
    /**
     * refresh follows a change of eligibility: it aborts the watch when frames are not
     * wanted, and starts one when they are wanted again (its first request waits for the
     * API's pace after the previous one). A closed window whose feed is down comes back
     * here at recheckAt.
     */
    refresh() {
        this.syncTicker();
        clearTimeout(this.recheckTimer);
        this.recheckTimer = undefined;
        const eligible = this.eligible();
        if (!eligible && this.watch) {
            this.watch.abort();
            this.watch = undefined;
        }
        else if (eligible && !this.watch) {
            this.startWatch();
        }
        const wait = this.recheckAt - Date.now();
        if (!eligible && !this.disposed && this.feedState === 'down' && this.display === 'closed' && wait > 0) {
            this.recheckTimer = setTimeout(() => this.refresh(), wait);
        }
    }
    startWatch() {
        const watch = new AbortController();
        this.watch = watch;
        // askedIn is the generation in which the watch's current request was sent (a watch
        // has one request at a time, and onRequest runs as it is sent).
        let askedIn = this.generation;
        void watchWorkerView({
            baseUrl: location.origin,
            auth: this.options.token,
            agentId: this.options.agentId,
            signal: watch.signal,
            ...(this.lastRequestAt === undefined ? {} : { lastRequestAt: this.lastRequestAt }),
            onUpdate: (update) => this.onUpdate(update, watch.signal, askedIn),
            onRequest: (at) => {
                this.lastRequestAt = at;
                askedIn = this.generation;
            },
            onWait: (nextAt) => {
                this.nextAt = nextAt;
                this.updateNotice();
            },
        }).then((end) => {
            if (this.watch === watch) {
                this.watch = undefined;
            }
            if (this.disposed || watch.signal.aborted) {
                return;
            }
            switch (end.reason) {
                case 'unauthenticated':
                    this.options.onUnauthorized();
                    break;
                case 'notFound':
                case 'forbidden':
                    this.setNotFound();
                    break;
                case 'closed':
                case 'aborted':
                    break;
            }
            this.refresh();
        });
    }
    /**
     * onUpdate shows the answer to a request sent in generation askedIn. The watch sends
     * its next request at the normal interval after every answer, also while a new
     * session's first tab is awaited.
     */
    async onUpdate(update, signal, askedIn) {
        if (this.disposed || signal.aborted || this.display === 'notFound') {
            return;
        }
        if (askedIn !== this.generation) {
            // The feed has named another session since the request was sent: the answer is
            // the old session's. Dropped; a `{"live":false}` ends the watch all the same, and
            // its end starts a new one for the session now named (refresh).
            return;
        }
        switch (update.kind) {
            case 'frame':
                this.viewSaysLive(true);
                try {
                    await this.swapFrame(update.page, askedIn);
                    this.setUnavailable(false);
                }
                catch {
                    // A frame that did not decode: as unavailable as a 503.
                    this.setUnavailable(true);
                }
                return;
            case 'noTab':
                this.viewSaysLive(true);
                this.setUnavailable(false);
                if (this.display === 'closed') {
                    // A closed window asked while the feed is down and found a new session: wait for
                    // its first tab as when the feed reports one.
                    this.show('waiting');
                    this.waitingSince = Date.now();
                }
                if (this.display === 'waiting' && Date.now() - this.waitingSince < waitForTabMs) {
                    // A new session that has not opened its first tab yet: keep waiting (and
                    // asking every 5 s, as ever).
                    return;
                }
                this.clearFrame('noTab');
                return;
            case 'unavailable':
                // 429, 503, a failed request: keep whatever is shown. Never a closed browser,
                // and never a sign-out, also when the sign-in service is what is down.
                this.setUnavailable(true, update.error.error.code === 'identity_unavailable');
                return;
            case 'closed':
                // The feed will report the stop too; until it reports a new session (or, while it
                // is down, the view route finds one), stay closed.
                this.viewSaysLive(false);
                this.closedSession = this.feed?.sessionId;
                this.clearFrame('closed');
                return;
        }
    }
    /**
     * viewSaysLive corrects the session line when the view route contradicts a feed that
     * is not up (its last event is stale, or there was none).
     */
    viewSaysLive(live) {
        if (this.feedState === 'up' || this.sessionLine === live) {
            return;
        }
        this.session.textContent = live ? '' : `Сессия агента: ${sessionStatus.stopped}`;
        this.sessionLine = live ? undefined : false;
    }
    setUnavailable(unavailable, signInDown = false) {
        this.unavailable = unavailable;
        this.signInDown = unavailable && signInDown;
        this.updateNotice();
        this.syncTicker();
    }
    /** updateNotice says the view is unavailable, with a live countdown to the next try. */
    updateNotice() {
        if (!this.unavailable || this.display === 'closed' || this.display === 'notFound') {
            this.notice.textContent = '';
            return;
        }
        const seconds = Math.ceil((this.nextAt - Date.now()) / 1_000);
        const when = this.watch && seconds > 0 ? `Повторим через ${seconds} с.` : 'Повторяем…';
        const what = this.signInDown ? 'Сервис входа не отвечает' : 'Просмотр временно недоступен';
        this.notice.textContent = this.display === 'frame' ? `${what}: показан последний снимок. ${when}` : `${what}. ${when}`;
    }
    /**
     * swapFrame decodes the JPEG in a detached image and only then shows it, unless the
     * feed named another session than generation askedIn's meanwhile.
     */
    async swapFrame(page, askedIn) {
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
        if (this.disposed || askedIn !== this.generation) {
            URL.revokeObjectURL(url);
            return;
        }
        // The decoded image is in the document's list of available images, so the visible
        // element switches to it at once, without a blank frame.
        const title = page.title || 'Без названия';
        this.image.src = url;
        this.image.alt = `Снимок вкладки «${title}»`;
        this.image.width = decoded.naturalWidth;
        this.image.height = decoded.naturalHeight;
        this.open.setAttribute('aria-label', `Открыть снимок вкладки «${title}» в полном размере`);
        this.dialogImage.src = url;
        this.dialogImage.alt = this.image.alt;
        this.dialogTitle.textContent = title;
        if (this.frameUrl) {
            URL.revokeObjectURL(this.frameUrl);
        }
        this.frameUrl = url;
        this.pageTitle.textContent = title;
        this.pageUrl.textContent = page.url;
        this.showMasked(page);
        this.age.dateTime = page.capturedAt;
        this.capturedAt = Date.parse(page.capturedAt);
        this.show('frame');
        this.updateAge();
    }
    /**
     * showMasked says what the broker masked of the frame of page: nothing; secret regions
     * («Часть страницы скрыта» over the top corner); or the whole frame, and why, over its
     * middle (page.hidden, which comes with masked; an unknown reason gets a general
     * sentence). Its coming, going and changing move nothing.
     */
    showMasked(page) {
        const reason = page.hidden;
        const whole = typeof reason === 'string' && reason !== '';
        this.masked.hidden = !whole && !(page.masked !== undefined && page.masked > 0);
        this.masked.classList.toggle('bw-masked-whole', whole);
        this.masked.textContent = whole ? hiddenText(reason) : 'Часть страницы скрыта';
        this.masked.title = whole ? 'Секреты на этом снимке не удалось закрыть по отдельности, поэтому он закрыт весь.' : maskedTitle;
    }
    /** openFull shows the frame at its full size in a modal dialog (Esc closes it). */
    openFull() {
        if (this.display === 'frame' && !this.dialog.open) {
            this.dialog.showModal();
        }
    }
    /** clearFrame removes the picture and shows a message in its place. */
    clearFrame(display) {
        if (this.dialog.open) {
            this.dialog.close();
        }
        this.image.removeAttribute('src');
        this.image.alt = '';
        this.masked.hidden = true;
        this.dialogImage.removeAttribute('src');
        if (this.frameUrl) {
            URL.revokeObjectURL(this.frameUrl);
            this.frameUrl = undefined;
        }
        this.unavailable = false;
        this.signInDown = false;
        if (display === 'closed') {
            this.recheckAt = Date.now() + closedRecheckMs - closedRecheckJitterMs + Math.random() * 2 * closedRecheckJitterMs;
        }
        this.show(display);
        this.updateNotice();
    }
    show(display) {
        this.display = display;
        const frame = display === 'frame';
        this.caption.hidden = !frame;
        this.open.hidden = !frame;
        this.placeholder.hidden = frame;
        if (!frame) {
            [this.placeholderText.textContent, this.placeholderHint.textContent] = placeholders[display];
        }
        this.syncTicker();
    }
    /**
     * syncTicker ticks the frame's age and the countdown every second, only while someone
     * can see them.
     */
    syncTicker() {
        const wanted = !this.disposed && (this.display === 'frame' || this.unavailable) && this.expanded && document.visibilityState === 'visible';
        if (wanted && this.ticker === undefined) {
            this.tick();
            this.ticker = setInterval(() => this.tick(), 1_000);
        }
        else if (!wanted && this.ticker !== undefined) {
            clearInterval(this.ticker);
            this.ticker = undefined;
        }
    }
    tick() {
        if (this.display === 'frame') {
            this.updateAge();
        }
        this.updateNotice();
    }
    updateAge() {
        this.age.textContent = `Снимок сделан ${formatAge(Date.now() - this.capturedAt)}`;
    }
}
