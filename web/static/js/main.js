// The web app: sign-in, a home page listing the signed-in member's agents (and a form
// to open one by id), and the agent's worker and chat screens (hash routes
// #/agents/{id}/worker and #/agents/{id}/chat), both with the «Браузер агента» window.
import { Agents } from '@agentfy/sdk';
import { BrowserWindow } from './browser-window.js';
import { el } from './dom.js';
import { StatusFeed } from './status-feed.js';
import { currentToken, signIn, signOut, takeTokenFromFragment, tokenSubject } from './token.js';
const main = document.getElementById('main');
const account = document.getElementById('account');
const agentIdPattern = /^[A-Za-z0-9_-]{1,64}$/;
function parseRoute(hash) {
    const path = hash.replace(/^#/, '');
    if (path === '' || path === '/') {
        return { name: 'home' };
    }
    const m = /^\/agents\/([^/]+)\/(worker|chat)$/.exec(path);
    const agentId = m?.[1] && decodeURIComponent(m[1]);
    if (m && agentId && agentIdPattern.test(agentId)) {
        return { name: 'agent', agentId, tab: m[2] === 'chat' ? 'chat' : 'worker' };
    }
    return { name: 'missing' };
}
function agentHref(agentId, tab) {
    return `#/agents/${encodeURIComponent(agentId)}/${tab}`;
}
/** The screen on view; an agent screen stays while only its tab changes. */
let agentScreen;
function render(focus) {
    const token = currentToken();
    renderAccount(token);
    if (token === null) {
        closeAgentScreen();
        homeLoad?.abort();
        showSignIn(sessionExpired);
        return;
    }
    sessionExpired = false;
    const route = parseRoute(location.hash);
    if (route.name === 'agent') {
        if (agentScreen?.agentId !== route.agentId) {
            closeAgentScreen();
            agentScreen = new AgentScreen(route.agentId, token);
        }
        agentScreen.show(route.tab);
    }
    else {
        closeAgentScreen();
        homeLoad?.abort();
        if (route.name === 'home') {
            showHome(token);
        }
        else {
            showMissing();
        }
    }
    if (focus) {
        main.querySelector('h1')?.focus();
    }
}
function closeAgentScreen() {
    agentScreen?.dispose();
    agentScreen = undefined;
}
function renderAccount(token) {
    if (token === null) {
        account.replaceChildren();
        return;
    }
    const out = el('button', { type: 'button', class: 'link-button' }, 'Выйти');
    out.addEventListener('click', () => {
        signOut();
        render(true);
    });
    const who = tokenSubject(token);
    account.replaceChildren(...(who ? [el('span', { class: 'account-name' }, who)] : []), out);
}
/** sessionExpired is set when the API refused the token, to say so on the sign-in screen. */
let sessionExpired = false;
function expireSession() {
    signOut();
    sessionExpired = true;
    render(true);
}
function showSignIn(expired) {
    document.title = 'Вход — Agentfy';
    const input = el('input', {
        id: 'token',
        type: 'password',
        autocomplete: 'off',
        spellcheck: 'false',
        required: true,
        'aria-describedby': 'token-help',
    });
    // The field has no name, so even a form submitted without JavaScript could not put the
    // token into a URL.
    const form = el('form', { class: 'card', 'aria-labelledby': 'signin-heading' }, el('label', { for: 'token' }, 'Токен доступа'), input, el('p', { id: 'token-help', class: 'hint' }, 'Токен показывает команда agentfy-dev dev; он хранится только в этой вкладке.'), el('button', { type: 'submit' }, 'Войти'));
    form.addEventListener('submit', (event) => {
        event.preventDefault();
        const token = input.value.trim();
        if (token !== '') {
            signIn(token);
            render(true);
        }
    });
    main.replaceChildren(el('h1', { id: 'signin-heading', tabindex: '-1' }, 'Вход'), ...(expired ? [el('p', { class: 'alert', role: 'alert' }, 'Токен не подошёл или истёк. Войдите снова.')] : []), form);
}
const agentStatus = {
    running: 'работает',
    idle: 'ожидает',
    stopped: 'сессии нет',
};
/** homeLoad aborts the home page's list request when the page changes. */
let homeLoad;
function showHome(token) {
    document.title = 'Agentfy';
    const list = el('div', { class: 'agent-list', 'aria-busy': 'true' }, el('p', { class: 'hint' }, 'Загружаем список агентов…'));
    const input = el('input', { id: 'agent-id', type: 'text', required: true, pattern: agentIdPattern.source, autocomplete: 'off', spellcheck: 'false', placeholder: 'например, agent-scout' });
    const open = (tab) => (event) => {
        event.preventDefault();
        if (input.reportValidity()) {
            location.hash = agentHref(input.value.trim(), tab);
        }
    };
    const worker = el('button', { type: 'submit' }, 'Рабочий экран');
    const chat = el('button', { type: 'button', class: 'secondary' }, 'Чат');
    const form = el('form', { class: 'card', 'aria-labelledby': 'open-heading' }, el('h2', { id: 'open-heading' }, 'Открыть по идентификатору'), el('label', { for: 'agent-id' }, 'Идентификатор агента'), input, el('div', { class: 'actions' }, worker, chat));
    form.addEventListener('submit', open('worker'));
    chat.addEventListener('click', open('chat'));
    main.replaceChildren(el('h1', { id: 'home-heading', tabindex: '-1' }, 'Агенты'), el('section', { 'aria-labelledby': 'home-heading' }, list), form);
    void loadAgents(token, list);
}
/** loadAgents fills the home page's list of agents (GET /v1/agents). */
async function loadAgents(token, list) {
    homeLoad?.abort();
    const load = new AbortController();
    homeLoad = load;
    const { data, error, response } = await Agents.listAgents({
        baseUrl: location.origin,
        auth: token,
        cache: 'no-store',
        signal: AbortSignal.any([load.signal, AbortSignal.timeout(20_000)]),
    });
    if (load.signal.aborted || !list.isConnected) {
        return;
    }
    list.removeAttribute('aria-busy');
    if (error !== undefined) {
        if (response?.status === 401) {
            expireSession();
            return;
        }
        const retry = el('button', { type: 'button', class: 'secondary' }, 'Повторить');
        retry.addEventListener('click', () => {
            list.setAttribute('aria-busy', 'true');
            list.replaceChildren(el('p', { class: 'hint' }, 'Загружаем список агентов…'));
            void loadAgents(token, list);
        });
        // 503 identity_unavailable: the sign-in service does not answer. The user stays
        // signed in; only a 401 signs out.
        const why = error.error?.code === 'identity_unavailable' ? 'Сервис входа не отвечает. ' : '';
        list.replaceChildren(el('p', { class: 'alert', role: 'alert' }, `${why}Не удалось загрузить список агентов.`), retry);
        return;
    }
    if (data.agents.length === 0) {
        list.replaceChildren(el('p', { class: 'hint' }, 'В ваших командах пока нет агентов.'));
        return;
    }
    list.replaceChildren(el('ul', { class: 'agents' }, ...data.agents.map((a) => el('li', { class: 'agent' }, el('a', { href: agentHref(a.id, 'worker'), class: 'agent-link' }, el('span', { class: 'agent-name' }, a.name || a.id), el('span', { class: 'agent-id', translate: 'no' }, a.id)), el('span', { class: `agent-status ${a.live ? 'live' : 'stopped'}` }, agentStatus[a.status]), el('a', { href: agentHref(a.id, 'chat'), class: 'agent-chat', 'aria-label': `Чат агента ${a.name || a.id}` }, 'Чат')))));
}
function showMissing() {
    document.title = 'Страница не найдена — Agentfy';
    main.replaceChildren(el('h1', { tabindex: '-1' }, 'Страница не найдена'), el('p', {}, el('a', { href: '#/' }, 'На главную')));
}
/**
 * AgentScreen is the agent's worker or chat screen. It owns the status feed and the
 * browser window, which stay (with their frame) while the person switches tabs.
 */
class AgentScreen {
    agentId;
    feed;
    window;
    constructor(agentId, token) {
        this.agentId = agentId;
        this.window = new BrowserWindow({ agentId, token, onUnauthorized: expireSession });
        this.feed = new StatusFeed(agentId, token, {
            onStatus: (event) => this.window.setStatus(event),
            onUnauthorized: expireSession,
            onNotFound: () => this.window.setNotFound(),
            onDown: () => this.window.setFeedDown(),
        });
    }
    show(tab) {
        const tabName = tab === 'worker' ? 'Рабочий экран' : 'Чат';
        document.title = `${tabName}: ${this.agentId} — Agentfy`;
        const link = (t, text) => el('a', { href: agentHref(this.agentId, t), ...(t === tab ? { 'aria-current': 'page' } : {}) }, text);
        const content = tab === 'worker'
            ? el('div', { class: 'worker-layout' }, this.window.element)
            : el('div', { class: 'chat-layout' }, demoChat(), this.window.element);
        main.replaceChildren(el('h1', { tabindex: '-1' }, 'Агент ', el('span', { class: 'agent-id', translate: 'no' }, this.agentId)), el('nav', { class: 'tabs', 'aria-label': 'Разделы агента' }, el('ul', {}, el('li', {}, link('worker', 'Рабочий экран')), el('li', {}, link('chat', 'Чат')))), content);
    }
    dispose() {
        this.feed.close();
        this.window.dispose();
    }
}
/** demoChat is a fixed conversation: there is no chat backend yet. */
function demoChat() {
    const messages = [
        ['Вы', true, 'Найди в каталоге степлер и проверь страницу аккаунта.'],
        ['Агент', false, 'Открываю каталог и ищу «stapler».'],
        ['Агент', false, 'Нашёл. Теперь смотрю страницу аккаунта — её видно в окне «Браузер агента».'],
    ];
    return el('section', { class: 'chat', 'aria-labelledby': 'chat-heading' }, el('h2', { id: 'chat-heading' }, 'Переписка'), el('p', { class: 'hint' }, 'Демонстрационная переписка: отправка сообщений пока недоступна.'), el('ol', { class: 'messages' }, ...messages.map(([who, mine, text]) => el('li', { class: mine ? 'message mine' : 'message' }, el('strong', { class: 'author' }, who), el('p', {}, text)))));
}
takeTokenFromFragment();
window.addEventListener('hashchange', () => {
    takeTokenFromFragment();
    render(true);
});
render(false);
