// What moves on the page now (broker/motion.go): called in the broker's isolated world,
// it reads and changes nothing. viewTransition: a view transition runs (its
// pseudo-elements paint images no snapshot holds). layout: a running animation or
// transition changes something that may move any element (a size, a position, a
// shadow or filter of unbounded reach). moving: how many running animations move their
// element and what is inside it (a transform, a motion path). related: one of those
// moves one of secrets (the elements the broker's masks are placed on: the moving
// element holds one, or one holds it, across shadow roots too).
function (...secrets) {
  const out = { viewTransition: false, layout: false, moving: 0, related: false };
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
    try {
      for (const k of effect.getKeyframes()) {
        for (const p of Object.keys(k)) {
          if (p !== 'offset' && p !== 'computedOffset' && p !== 'easing' && p !== 'composite') props.add(camel(p));
        }
      }
    } catch (e) {
      out.layout = true;
    }
    let moves = false;
    for (const p of props) {
      if (moving.has(p)) moves = true;
      else if (!still.has(p)) out.layout = true;
    }
    if (!moves) continue;
    out.moving++;
    const target = effect.target;
    if (target === null || target === undefined) {
      out.related = out.related || secrets.length > 0;
      continue;
    }
    for (const s of secrets) {
      if (within(s, target) || within(target, s)) out.related = true;
    }
  }
  return out;
}
