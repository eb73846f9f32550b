// What enters or leaves the page while it is captured (broker/watch.go): called in the
// broker's isolated world, start(attributes, classes, ...roots) watches the document for
// an element that may be a secret — a field that looks like a password, card or code
// field (loosely: more than the broker's rules mask), a frame, an SVG <use>, a label, one
// marked private by attributes or classes (the rules' lists), one of roots (the secrets
// the broker read) — added, removed, or made or unmade one by an attribute (or any id
// changed), anywhere in it; take() stops watching and says whether that happened. The
// observer belongs to the isolated world: the page's scripts cannot see it, and it
// changes nothing.
({
  start(attributes, classes, ...roots) {
    const prev = globalThis.agentfyWatch;
    if (prev) prev.observer.disconnect();
    const attrs = new Set(attributes.map((a) => a.toLowerCase()));
    const cls = new Set(classes.map((c) => c.toLowerCase()));
    const fieldTags = new Set(['input', 'textarea', 'select']);
    const tags = new Set(['iframe', 'frame', 'fencedframe', 'object', 'embed', 'portal', 'use', 'label']);
    const privateClass = (v) => typeof v === 'string' && v.split(/\s+/).some((c) => cls.has(c.toLowerCase()));
    const words = /pass|pwd|pin|otp|cvc|cvv|csc|cvn|one-?time|security.?code|пароль|пин/i;
    const field = (el) => {
      if ((el.getAttribute('type') || '').toLowerCase() === 'password') return true;
      if (/password|one-time-code|cc-/i.test(el.getAttribute('autocomplete') || '')) return true;
      if (['name', 'id', 'aria-label', 'placeholder'].some((a) => words.test(el.getAttribute(a) || ''))) return true;
      return [...(el.labels || [])].some((l) => words.test(l.textContent));
    };
    const secretish = (el) => {
      const tag = el.localName.toLowerCase();
      if (tags.has(tag)) return true;
      if ((fieldTags.has(tag) || el.hasAttribute('contenteditable')) && field(el)) return true;
      for (const a of el.getAttributeNames()) {
        if (attrs.has(a.toLowerCase()) || a.toLowerCase() === 'data-dd-privacy' || a.toLowerCase() === 'data-clarity-mask') return true;
      }
      return privateClass(el.getAttribute('class'));
    };
    // holds reports whether node is, or holds, an element that may be a secret.
    const holds = (node) => {
      if (node.nodeType !== 1) return false;
      if (secretish(node)) return true;
      const all = node.getElementsByTagName('*');
      if (all.length > 5000) return true;
      for (const el of all) {
        if (secretish(el)) return true;
      }
      return false;
    };
    const fields = new Set(['type', 'autocomplete', 'name', 'id', 'aria-label', 'placeholder', 'allow']);
    const w = { changed: false, observer: null };
    const see = (records) => {
      for (const r of records) {
        if (w.changed) return;
        if (r.type === 'childList') {
          for (const n of r.addedNodes) if (holds(n)) w.changed = true;
          for (const n of r.removedNodes) {
            if (holds(n) || roots.some((root) => n === root || n.contains(root))) w.changed = true;
          }
          continue;
        }
        const name = r.attributeName.toLowerCase();
        const el = r.target;
        if (name === 'id') {
          w.changed = true; // the pins find some secrets by their ids
        } else if (name === 'class') {
          if (privateClass(r.oldValue) !== privateClass(el.getAttribute('class'))) w.changed = true;
        } else if (attrs.has(name) || name === 'contenteditable' || name === 'data-dd-privacy' || name === 'data-clarity-mask') {
          w.changed = true;
        } else if (fields.has(name) && (fieldTags.has(el.localName.toLowerCase()) || tags.has(el.localName.toLowerCase()))) {
          w.changed = true;
        }
      }
    };
    w.observer = new MutationObserver(see);
    w.see = see;
    w.observer.observe(document, {
      childList: true, subtree: true, attributes: true, attributeOldValue: true,
      attributeFilter: [...fields, 'class', 'contenteditable', 'data-dd-privacy', 'data-clarity-mask', ...attrs],
    });
    globalThis.agentfyWatch = w;
    return true;
  },
  take() {
    const w = globalThis.agentfyWatch;
    if (!w) return true;
    w.see(w.observer.takeRecords());
    w.observer.disconnect();
    globalThis.agentfyWatch = undefined;
    return w.changed;
  },
})
