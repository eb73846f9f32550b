// What moves on the page now (broker/motion.go): called in the broker's isolated world,
// it reads and changes nothing. viewTransition: a view transition runs (its
// pseudo-elements paint images no snapshot holds). layout: a running animation or
// transition changes something that may move any element (a size, a position, a
// shadow or filter of unbounded reach). moving: how many running animations move their
// element and what is inside it (a transform, a motion path). related: one of those
// moves one of secrets (the elements the broker's masks are placed on: the moving
// element holds one, or one holds it, across shadow roots too). ink: an animation or
// transition of one of secrets (or of an element holding one) changes anything but
// where and how big its box is drawn and its colours (a shadow, a filter, a font, a
// size that may make it overflow): a mask on its box may not cover what it paints.
function (...secrets) {
  const out = { viewTransition: false, layout: false, moving: 0, related: false, ink: false };
  const root = document.documentElement;
  try {
    out.viewTransition = root !== null && root.matches(':active-view-transition');
  } catch (e) {}
  const still = new Set(['opacity', 'color', 'backgroundColor', 'backgroundImage', 'backgroundPosition',
    'backgroundPositionX', 'backgroundPositionY', 'backgroundSize', 'borderColor', 'borderTopColor',
    'borderRightColor', 'borderBottomColor', 'borderLeftColor', 'outlineColor', 'fill', 'fillOpacity',
    'stroke', 'strokeOpacity', 'strokeDashoffset', 'visibility', 'caretColor', 'accentColor',
    'textDecorationColor', 'columnRuleColor', 'stopColor', 'floodColor', 'lightingColor']);
  const moving = new Set(['transform', 'translate', 'rotate', 'scale', 'offsetDistance', 'offsetPath',
    'offsetRotate', 'offsetAnchor', 'offsetPosition']);
  // What moves a box without changing what is drawn inside it, or draws only its shape.
  const placed = new Set(['top', 'left', 'right', 'bottom', 'inset', 'insetBlock', 'insetInline',
    'insetBlockStart', 'insetBlockEnd', 'insetInlineStart', 'insetInlineEnd', 'margin', 'marginTop',
    'marginRight', 'marginBottom', 'marginLeft', 'marginBlock', 'marginInline', 'marginBlockStart',
    'marginBlockEnd', 'marginInlineStart', 'marginInlineEnd', 'boxShadow', 'outline', 'outlineWidth',
    'outlineOffset', 'outlineStyle', 'borderRadius']);
  const camel = (p) => p.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  // within reports whether node is inner or inside it, through shadow roots.
  const within = (node, inner) => {
    for (let n = node; n !== null && n !== undefined; n = n.parentNode || n.host) {
      if (n === inner) return true;
    }
    return false;
  };
  for (const a of document.getAnimations()) {
    if (a.playState !== 'running') continue;
    const effect = a.effect;
    if (effect === null) continue;
    if (typeof effect.pseudoElement === 'string' && effect.pseudoElement.startsWith('::view-transition')) {
      out.viewTransition = true;
      continue;
    }
    const props = new Set();
    if (typeof a.transitionProperty === 'string') props.add(camel(a.transitionProperty));
    let unread = false;
    try {
      for (const k of effect.getKeyframes()) {
        for (const p of Object.keys(k)) {
          if (p !== 'offset' && p !== 'computedOffset' && p !== 'easing' && p !== 'composite') props.add(camel(p));
        }
      }
    } catch (e) {
      out.layout = true;
      unread = true;
    }
    let moves = false;
    for (const p of props) {
      if (moving.has(p)) moves = true;
      else if (!still.has(p)) out.layout = true;
    }
    // Does it animate one of secrets, or an element holding one?
    let rel = false;
    if (secrets.length > 0) {
      const target = effect.target;
      if (target === null || target === undefined) {
        rel = true;
      } else {
        for (const s of secrets) {
          if (within(s, target) || within(target, s)) rel = true;
        }
      }
    }
    if (rel && (unread || [...props].some((p) => !moving.has(p) && !still.has(p) && !placed.has(p)))) out.ink = true;
    if (!moves) continue;
    out.moving++;
    if (rel) out.related = true;
  }
  return out;
}
