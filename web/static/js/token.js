// The signed-in person's token. It lives in this tab's sessionStorage only: the dev banner
// hands it over in the URL fragment (which browsers never send to a server), and the
// sign-in form takes it pasted. It travels to the API only in the Authorization header.
const storageKey = 'agentfy.token';
/** The stored token, or null when nobody is signed in. */
export function currentToken() {
    return sessionStorage.getItem(storageKey);
}
export function signIn(token) {
    sessionStorage.setItem(storageKey, token);
}
export function signOut() {
    sessionStorage.removeItem(storageKey);
}
/**
 * takeTokenFromFragment moves a token given as `#token=…` (alone or after a route, as in
 * `#/agents/agent-scout/worker?token=…`) into sessionStorage and removes it from the
 * address bar and the history entry, keeping the route.
 */
export function takeTokenFromFragment() {
    const hash = location.hash;
    const match = /[#?&]token=([^&]*)/.exec(hash);
    if (!match) {
        return;
    }
    const token = decodeURIComponent(match[1] ?? '').trim();
    if (token !== '') {
        signIn(token);
    }
    let route = hash.slice(0, match.index) + hash.slice(match.index + match[0].length);
    route = route.replace(/[?&]$/, '').replace(/^#[?&]?/, '');
    history.replaceState(history.state, '', location.pathname + location.search + (route ? `#${route}` : ''));
}
/**
 * tokenSubject reads the token's `sub` claim for display. The token is not verified here:
 * the API verifies it on every request, and a bad one sends the person back to sign-in.
 */
export function tokenSubject(token) {
    const payload = token.split('.')[1];
    if (!payload) {
        return null;
    }
    try {
        const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/'));
        const claims = JSON.parse(json);
        if (typeof claims === 'object' && claims !== null && 'sub' in claims && typeof claims.sub === 'string') {
            return claims.sub;
        }
    }
    catch {
        // Not a JWT we can read: show no name.
    }
    return null;
}
