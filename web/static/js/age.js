/**
 * formatAge says in Russian how long ago something happened: «только что», «3 с назад»,
 * «2 мин назад», «1 ч назад». The abbreviations need no plural forms. A negative age
 * (the viewer's clock behind the server's) reads as «только что».
 */
export function formatAge(ms) {
    const s = Math.floor(ms / 1000);
    if (s < 1) {
        return 'только что';
    }
    if (s < 60) {
        return `${s} с назад`;
    }
    const min = Math.floor(s / 60);
    if (min < 60) {
        return `${min} мин назад`;
    }
    return `${Math.floor(min / 60)} ч назад`;
}
