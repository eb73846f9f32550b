package masks

import (
	"math"
	"strconv"
	"strings"
)

// Chromium paints some of an element's ink outside its layout box: shadows, filters,
// reflections. A mask placed from the box alone would leave those copies readable, so
// the snapshot reads the computed styles that do it (inkStyles, in this order) and
// each secret's mask grows to cover them (inkOf).
var inkStyles = []string{"text-shadow", "box-shadow", "filter", "-webkit-box-reflect", "transform", "scale", "zoom"}

// Indices into inkStyles.
const (
	styleTextShadow = iota
	styleBoxShadow
	styleFilter
	styleReflect
	styleTransform
	styleScale
	styleZoom
)

// outset is how far an element's ink may reach beyond its box, in CSS pixels of the
// top document, on each side.
type outset struct{ left, top, right, bottom float64 }

func (o outset) add(p outset) outset {
	return outset{o.left + p.left, o.top + p.top, o.right + p.right, o.bottom + p.bottom}
}

func (o outset) scaled(k float64) outset {
	return outset{o.left * k, o.top * k, o.right * k, o.bottom * k}
}

// grow widens r by o.
func (r Rect) grow(o outset) Rect {
	return Rect{r.X - o.left, r.Y - o.top, r.W + o.left + o.right, r.H + o.top + o.bottom}
}

// blurReach is how far a blur of radius r spreads ink, as a multiple of r: a Gaussian
// of standard deviation r/2 (CSS shadows) or r (the blur() filter) is below one
// 8-bit step of a full-contrast edge within 3 standard deviations.
const blurReach = 3

// maxInk bounds an outset: a page that asks for more (a shadow a screen away) is
// masked whole instead (errWholeViewport), as one whose ink cannot be placed.
const maxInk = 4096

// shadowOutset is the reach of a computed text-shadow or box-shadow list, e.g.
// "rgb(0, 200, 0) 0px 80px 0px, rgb(0, 0, 0) 1px 1px 2px". An inset box shadow paints
// inside the box. ok is false for a value it cannot read.
func shadowOutset(v string, box bool) (o outset, ok bool) {
	if v == "" || v == "none" {
		return outset{}, true
	}
	for _, shadow := range splitTopLevel(v, ',') {
		if box && strings.Contains(" "+shadow+" ", " inset ") {
			continue
		}
		lengths, ok := pxLengths(shadow)
		if !ok || len(lengths) < 2 || len(lengths) > 4 {
			return outset{}, false
		}
		var blur, spread float64
		if len(lengths) > 2 {
			blur = math.Abs(lengths[2]) / 2 * blurReach
		}
		if len(lengths) > 3 && box {
			spread = lengths[3]
		}
		x, y, r := lengths[0], lengths[1], blur+max(spread, 0)
		o.left = max(o.left, r-x)
		o.right = max(o.right, r+x)
		o.top = max(o.top, r-y)
		o.bottom = max(o.bottom, r+y)
	}
	return o, true
}

// filterOutset is the reach of a computed filter, e.g. "drop-shadow(rgb(255, 0, 0) 3px
// 4px 5px) blur(2px)": a drop shadow as a shadow, a blur around the box, the colour
// functions nothing. ok is false for url() (an SVG filter may move ink anywhere) and for
// anything it cannot read.
func filterOutset(v string) (o outset, ok bool) {
	if v == "" || v == "none" {
		return outset{}, true
	}
	for _, f := range splitTopLevel(v, ' ') {
		open := strings.IndexByte(f, '(')
		if open <= 0 || !strings.HasSuffix(f, ")") {
			return outset{}, false
		}
		name, args := f[:open], f[open+1:len(f)-1]
		switch name {
		case "drop-shadow":
			s, ok := shadowOutset(args, false)
			if !ok {
				return outset{}, false
			}
			// Each filter applies to the result of the ones before it.
			o = o.add(s)
		case "blur":
			l, ok := pxLengths(args)
			if !ok || len(l) != 1 {
				return outset{}, false
			}
			r := math.Abs(l[0]) * blurReach
			o = o.add(outset{r, r, r, r})
		case "brightness", "contrast", "grayscale", "hue-rotate", "invert", "opacity", "saturate", "sepia":
		default:
			return outset{}, false
		}
	}
	return o, true
}

// reflection is a computed -webkit-box-reflect: the side the copy is on and its gap.
type reflection struct {
	side   string // "above", "below", "left" or "right"
	offset float64
}

// parseReflect reads a computed -webkit-box-reflect, e.g. "below 10px none". ok is
// false for a value it cannot read.
func parseReflect(v string) (r *reflection, ok bool) {
	if v == "" || v == "none" {
		return nil, true
	}
	side, rest, _ := strings.Cut(v, " ")
	switch side {
	case "above", "below", "left", "right":
	default:
		return nil, false
	}
	r = &reflection{side: side}
	if l, ok := pxLengths(strings.SplitN(rest, " ", 2)[0]); ok && len(l) == 1 {
		r.offset = l[0]
	}
	return r, true
}

// mirror is the box the reflection of box b is drawn in.
func (r reflection) mirror(b Rect) Rect {
	switch r.side {
	case "above":
		return Rect{b.X, b.Y - r.offset - b.H, b.W, b.H}
	case "below":
		return Rect{b.X, b.Y + b.H + r.offset, b.W, b.H}
	case "left":
		return Rect{b.X - r.offset - b.W, b.Y, b.W, b.H}
	default:
		return Rect{b.X + b.W + r.offset, b.Y, b.W, b.H}
	}
}

// scaleOf is how much a computed transform, scale and zoom enlarge what an element
// paints (its outsets are in its own CSS pixels). ok is false for what it cannot read.
func scaleOf(transform, scale, zoom string) (k float64, ok bool) {
	k = 1
	switch {
	case transform == "" || transform == "none":
	case strings.HasPrefix(transform, "matrix(") || strings.HasPrefix(transform, "matrix3d("):
		open := strings.IndexByte(transform, '(')
		var m []float64
		for _, s := range strings.Split(strings.TrimSuffix(transform[open+1:], ")"), ",") {
			f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return 0, false
			}
			m = append(m, f)
		}
		switch len(m) {
		case 6: // a b c d e f
			k = max(math.Hypot(m[0], m[1]), math.Hypot(m[2], m[3]))
		case 16: // column major; the 3×3 part, and a perspective makes it unknowable
			if m[3] != 0 || m[7] != 0 || m[11] != 0 || m[15] != 1 {
				return 0, false
			}
			k = max(math.Sqrt(m[0]*m[0]+m[1]*m[1]+m[2]*m[2]), math.Sqrt(m[4]*m[4]+m[5]*m[5]+m[6]*m[6]))
		default:
			return 0, false
		}
	default:
		return 0, false
	}
	if scale != "" && scale != "none" {
		s := 0.0
		for _, f := range strings.Fields(scale) {
			v, err := strconv.ParseFloat(strings.TrimSuffix(f, "%"), 64)
			if err != nil {
				return 0, false
			}
			if strings.HasSuffix(f, "%") {
				v /= 100
			}
			s = max(s, math.Abs(v))
		}
		k *= s
	}
	if zoom != "" && zoom != "normal" && zoom != "1" {
		z, err := strconv.ParseFloat(zoom, 64)
		if err != nil {
			return 0, false
		}
		k *= math.Abs(z)
	}
	if math.IsNaN(k) || math.IsInf(k, 0) {
		return 0, false
	}
	return max(k, 1), true
}

// pxLengths returns the numbers of the px lengths in s, skipping colours and keywords
// ("rgb(0, 200, 0) 0px 80px 0px" is 0, 80, 0). ok is false for a length in another
// unit (computed values are in px).
func pxLengths(s string) (l []float64, ok bool) {
	for _, tok := range splitTopLevel(s, ' ') {
		if strings.Contains(tok, "(") || tok == "inset" || tok == "" {
			continue // a colour function
		}
		if c := tok[0]; (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' {
			continue // a colour keyword
		}
		num, found := strings.CutSuffix(tok, "px")
		if !found && tok != "0" {
			return nil, false
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false
		}
		l = append(l, f)
	}
	return l, true
}

// splitTopLevel splits s at sep outside parentheses, trimming each part.
func splitTopLevel(s string, sep byte) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case sep:
			if depth == 0 {
				if p := strings.TrimSpace(s[start:i]); p != "" {
					parts = append(parts, p)
				}
				start = i + 1
			}
		}
	}
	if p := strings.TrimSpace(s[start:]); p != "" {
		parts = append(parts, p)
	}
	return parts
}

// ink is what a node of the top document paints beyond its box, with its ancestors'
// filters, transforms and reflections: the outset of its own box, the reflections of
// its ancestors (and its own) it appears in, and whether its ink cannot be placed at
// all (whole: an SVG filter, a perspective, a shadow beyond maxInk).
type ink struct {
	reach   outset // the filters of the node and its ancestors, scaled
	scale   float64
	mirrors []mirrorOf // reflections that copy the node: each reflecting element's box
	whole   bool
	// text is the outset of the node's own text-shadow, scaled: the part of its own
	// ink that copies what it draws (a box-shadow draws only its box's shape).
	text outset
}

type mirrorOf struct {
	r   reflection
	box Rect
}

// inkOf reads the ink of every node of doc from its computed styles (the snapshot's
// layout styles in inkStyles order), parents before children. own is each node's own
// shadows' outset (not inherited by its descendants' boxes). ok is false for a style
// index out of the string table.
//
// anyURLFilter says some node of the document, secret or not, has a filter it cannot
// read: an SVG filter can draw any element of the document (feImage) wherever it likes.
func inkOf(doc snapshotDocument, str func(int) (string, bool)) (inks []ink, own []outset, anyURLFilter, ok bool) {
	n := len(doc.Nodes.ParentIndex)
	styleOf := make([]int, n) // layout index of node i, or -1
	for i := range styleOf {
		styleOf[i] = -1
	}
	if len(doc.Layout.Styles) != 0 && len(doc.Layout.Styles) != len(doc.Layout.NodeIndex) {
		return nil, nil, false, false
	}
	for j, node := range doc.Layout.NodeIndex {
		if node >= 0 && node < n && styleOf[node] < 0 && j < len(doc.Layout.Styles) {
			styleOf[node] = j
		}
	}
	inks = make([]ink, n)
	own = make([]outset, n)
	for i := range n {
		p := doc.Nodes.ParentIndex[i]
		in := ink{scale: 1}
		if p >= 0 && p < i {
			in = inks[p]
			in.mirrors = in.mirrors[:len(in.mirrors):len(in.mirrors)] // appends copy
			in.text = outset{}                                        // its own, not inherited
		}
		if j := styleOf[i]; j >= 0 && len(doc.Layout.Styles[j]) > 0 { // the document node has none
			st := doc.Layout.Styles[j]
			if len(st) != len(inkStyles) {
				return nil, nil, false, false
			}
			v := make([]string, len(st))
			for k, idx := range st {
				if v[k], ok = str(idx); !ok {
					return nil, nil, false, false
				}
			}
			k, ok := scaleOf(v[styleTransform], v[styleScale], v[styleZoom])
			if !ok {
				in.whole = true
				k = 1
			}
			in.scale *= k
			f, ok := filterOutset(v[styleFilter])
			if !ok {
				in.whole, anyURLFilter = true, true
			}
			in.reach = in.reach.add(f.scaled(in.scale))
			ts, ok1 := shadowOutset(v[styleTextShadow], false)
			bs, ok2 := shadowOutset(v[styleBoxShadow], true)
			if !ok1 || !ok2 {
				in.whole = true
			}
			own[i] = outset{
				max(ts.left, bs.left), max(ts.top, bs.top), max(ts.right, bs.right), max(ts.bottom, bs.bottom),
			}.scaled(in.scale)
			in.text = ts.scaled(in.scale)
			r, ok := parseReflect(v[styleReflect])
			if !ok {
				in.whole = true
			} else if r != nil && j < len(doc.Layout.Bounds) && len(doc.Layout.Bounds[j]) == 4 {
				b := doc.Layout.Bounds[j]
				in.mirrors = append(in.mirrors, mirrorOf{*r, Rect{b[0], b[1], b[2], b[3]}.grow(in.reach)})
			}
		}
		if t := in.reach.add(own[i]); max(t.left, t.top, t.right, t.bottom) > maxInk {
			in.whole = true
		}
		inks[i] = in
	}
	return inks, own, anyURLFilter, true
}
