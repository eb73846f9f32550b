// A tiny element builder. Text always goes in as text nodes (never as HTML), so a page
// title or URL chosen by a web site the agent visits cannot inject markup.
export function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
        if (value === true) {
            node.setAttribute(name, '');
        }
        else if (value !== false) {
            node.setAttribute(name, value);
        }
    }
    node.append(...children);
    return node;
}
let lastId = 0;
/** uniqueId gives an element id for aria-controls and label references. */
export function uniqueId(prefix) {
    lastId++;
    return `${prefix}-${lastId}`;
}
