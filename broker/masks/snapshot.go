package masks

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
)

// errSnapshot is a snapshot Parse cannot read. It names nothing of the page: a
// snapshot holds the page's text and the values of its fields.
var errSnapshot = errors.New("dom snapshot unreadable")

// snapshot is what masking reads of DOMSnapshot.captureSnapshot's result. Every string
// is an index into Strings; -1 is none.
type snapshot struct {
	Documents []snapshotDocument `json:"documents"`
	Strings   []string           `json:"strings"`
}

type snapshotDocument struct {
	Nodes struct {
		ParentIndex          []int   `json:"parentIndex"`
		NodeName             []int   `json:"nodeName"`
		NodeValue            []int   `json:"nodeValue"`
		BackendNodeID        []int   `json:"backendNodeId"`
		Attributes           [][]int `json:"attributes"`
		ContentDocumentIndex struct {
			Index []int `json:"index"`
			Value []int `json:"value"`
		} `json:"contentDocumentIndex"`
	} `json:"nodes"`
	Layout struct {
		NodeIndex []int       `json:"nodeIndex"`
		Bounds    [][]float64 `json:"bounds"`
		Styles    [][]int     `json:"styles"`
	} `json:"layout"`
	FrameID       int     `json:"frameId"`
	ScrollOffsetX float64 `json:"scrollOffsetX"`
	ScrollOffsetY float64 `json:"scrollOffsetY"`
	ContentWidth  float64 `json:"contentWidth"`
	ContentHeight float64 `json:"contentHeight"`
}

// ComputedStyles returns the computed styles a snapshot must be taken with
// (DOMSnapshot.captureSnapshot's computedStyles), in this order: those that paint an
// element's ink outside its box (ink.go). Parse reads a snapshot's styles in this
// order, and refuses one with another count of them.
func ComputedStyles() []string { return slices.Clone(inkStyles) }

// Rect is a rectangle in CSS pixels of the top document.
type Rect struct{ X, Y, W, H float64 }

// Secrets are the secret regions of a snapshot, and what the broker needs to place
// them on a frame and to tell whether two reads agree.
type Secrets struct {
	// Regions are, for each secret element of the top document (or frame of it holding
	// one), the rectangles that draw it and its descendants, in document order.
	Regions [][]Rect
	// Whole says a secret's ink cannot be placed (an SVG filter, a perspective, a
	// shadow a screen away): the frame is masked whole.
	Whole bool
	// Roots are the backend node ids of the elements of the top document the regions
	// are placed on (a secret element, or the frame that holds one).
	Roots []int
	// inBox says, for each region, that everything of it that shows its content lies
	// within its root's border box: its descendants' boxes, their text shadows and
	// their ancestors' filters; a box-shadow, which draws only a box's shape, may reach
	// beyond. A mask Chromium draws on the root's box in the frame it paints (Pins)
	// covers such a region wherever the page moves it.
	inBox []bool
	// selectors are, for each root, a selector that matches it alone in the top
	// document's own tree, or "" (selectors).
	selectors []string
	// ScrollX and ScrollY are the top document's scroll offsets, and width and height
	// its content size, which must not move between the read and the capture.
	ScrollX, ScrollY, width, height float64
	// svgFilter says the top document has a filter that may draw any element anywhere
	// (inkOf): a secret placed later, in a frame, masks the frame whole too.
	svgFilter bool
	// Frames are the frame elements of the top document whose document the snapshot
	// does not hold (an out-of-process iframe, an embed): Parse leaves them for the
	// broker to read into, until PlaceFrames decides what each masks.
	Frames []Frame
	// placed are the frames whose secrets were placed from their own documents.
	placed []placedFrame
	// clear are the frames of another process read into that hold no secret, by their
	// index in PlaceFrames's views.
	clear []int
	// DocFrames are the frame ids of the snapshot's other documents (of the page's
	// process): a view transition in one may paint an image of a secret it held.
	DocFrames []string
}

// equal reports whether two reads found the same secrets at the same places.
func (s Secrets) equal(o Secrets) bool {
	return s.ScrollX == o.ScrollX && s.ScrollY == o.ScrollY && s.width == o.width && s.height == o.height && s.Whole == o.Whole &&
		slices.EqualFunc(s.Regions, o.Regions, slices.Equal)
}

// findSecrets is Parse with no frame read into: each of the top document's frames
// whose document the snapshot does not hold is masked whole (rules.opaqueFrames) or
// shown.
func findSecrets(raw []byte, rules Rules) (Secrets, error) {
	sec, err := Parse(raw, rules)
	if err != nil {
		return Secrets{}, err
	}
	return PlaceFrames(sec, nil, rules), nil
}

// Parse reads a DOMSnapshot.captureSnapshot result (taken with ComputedStyles) and
// returns its secret regions under rules, with the top document's frames whose
// document it does not hold left in Frames, for the caller to read into before
// PlaceFrames. Anything it cannot make sense of fails, with an error that names nothing
// of the page: a snapshot that might hide a secret is never read as one without.
func Parse(raw []byte, rules Rules) (Secrets, error) {
	var s snapshot
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Documents) == 0 {
		return Secrets{}, errSnapshot
	}
	owner, ok := s.owners()
	if !ok {
		return Secrets{}, errSnapshot
	}
	region, top, opaque, ok := s.secretNodes(rules)
	if !ok || !s.maskOwners(owner, region, &top) {
		return Secrets{}, errSnapshot
	}
	docFrames, ok := s.docFrames()
	if !ok {
		return Secrets{}, errSnapshot
	}
	doc := s.Documents[0]
	// An SVG <use> draws a copy of the element it names where the <use> is: when that
	// element is secret, so is the <use>.
	if err := secretUses(doc, s.str, region[0], &top); err != nil {
		return Secrets{}, err
	}
	inks, own, anyURLFilter, ok := inkOf(doc, s.str)
	if !ok {
		return Secrets{}, errSnapshot
	}
	if len(doc.Nodes.BackendNodeID) != 0 && len(doc.Nodes.BackendNodeID) != len(doc.Nodes.ParentIndex) {
		return Secrets{}, errSnapshot
	}
	out := Secrets{
		Whole:     anyURLFilter && len(top) > 0,
		svgFilter: anyURLFilter,
		ScrollX:   doc.ScrollOffsetX, ScrollY: doc.ScrollOffsetY,
		width: doc.ContentWidth, height: doc.ContentHeight,
		DocFrames: docFrames,
	}
	if !out.place(doc, region[0], top, inks, own, selectors(doc, s.str, top)) {
		return Secrets{}, errSnapshot
	}
	if out.Frames, ok = opaqueFrames(doc, opaque, inks, own); !ok {
		return Secrets{}, errSnapshot
	}
	return out, nil
}

// str looks up a snapshot's string table: -1 is none (""); ok is false for an index
// out of it.
func (s *snapshot) str(i int) (string, bool) {
	if i == -1 {
		return "", true
	}
	if i < 0 || i >= len(s.Strings) {
		return "", false
	}
	return s.Strings[i], true
}

// docRef is a node of one of a snapshot's documents.
type docRef struct{ doc, node int }

// owners returns, for each document but the top one, the frame element (document,
// node) that holds it. ok is false for a document held twice, by itself, or by none.
func (s *snapshot) owners() (owner []docRef, ok bool) {
	owner = make([]docRef, len(s.Documents))
	for i := range owner {
		owner[i] = docRef{-1, -1}
	}
	for d, doc := range s.Documents {
		cdi := doc.Nodes.ContentDocumentIndex
		if len(cdi.Index) != len(cdi.Value) {
			return nil, false
		}
		for k, child := range cdi.Value {
			if child <= 0 || child >= len(s.Documents) || owner[child].doc >= 0 || child == d {
				return nil, false
			}
			owner[child] = docRef{d, cdi.Index[k]}
		}
	}
	for _, c := range owner[1:] {
		if c.doc < 0 {
			return nil, false // a document no frame element holds
		}
	}
	return owner, true
}

// secretNodes finds the secret nodes of every document: region[d][n] is the secret
// region node n of document d belongs to, or -1 (in a document but the top one, 0: its
// frame element of the top document decides, maskOwners). top is the node of each
// secret root of the top document, by region; opaque the top document's frame elements
// whose document the snapshot does not hold (PlaceFrames decides). A frame element
// without its document inside another document is secret when rules.opaqueFrames.
func (s *snapshot) secretNodes(rules Rules) (region [][]int, top, opaque []int, ok bool) {
	region = make([][]int, len(s.Documents))
	for d, doc := range s.Documents {
		nodes := doc.Nodes
		n := len(nodes.ParentIndex)
		if len(nodes.NodeName) != n || len(nodes.Attributes) != n {
			return nil, nil, nil, false
		}
		labelled, ok := labelledSecrets(doc, s.str)
		if !ok {
			return nil, nil, nil, false
		}
		framed := make(map[int]bool, len(nodes.ContentDocumentIndex.Index)) // frame elements with a document here
		for _, f := range nodes.ContentDocumentIndex.Index {
			framed[f] = true
		}
		r := make([]int, n)
		for i := range n {
			r[i] = -1
			p := nodes.ParentIndex[i]
			if p >= i || p < -1 || (p == -1 && i != 0) {
				// Documents list their nodes parents first, from one root.
				return nil, nil, nil, false
			}
			if p >= 0 && r[p] >= 0 {
				r[i] = r[p]
				continue
			}
			secret, ok := isSecret(nodes.NodeName[i], nodes.Attributes[i], s.str, rules, labelled[i])
			if !ok {
				return nil, nil, nil, false
			}
			if !secret && !framed[i] {
				name, _ := s.str(nodes.NodeName[i])
				if slices.ContainsFunc(frameElements, func(f string) bool { return strings.EqualFold(f, name) }) {
					if d == 0 {
						// Read into it, or masked whole, by PlaceFrames.
						opaque = append(opaque, i)
					} else {
						// Inside a frame of this process: its iframe of the top
						// document is masked whole.
						secret = rules.opaqueFrames
					}
				}
			}
			switch {
			case secret && d == 0:
				r[i] = len(top)
				top = append(top, i)
			case secret:
				r[i] = 0 // the iframe of the top document decides
			}
		}
		region[d] = r
	}
	return region, top, opaque, true
}

// maskOwners makes secret, for each document but the top one with a secret that has a
// layout, the frame element of the top document that holds it (through frames in
// frames): its coordinates are its own, the frame's box holds all it draws. ok is
// false for a chain of owners that does not end in the top document.
func (s *snapshot) maskOwners(owner []docRef, region [][]int, top *[]int) bool {
	for d := len(s.Documents) - 1; d >= 1; d-- {
		if !hasSecretLayout(s.Documents[d], region[d]) {
			continue
		}
		at := docRef{d, -1}
		for steps := 0; at.doc != 0; steps++ {
			if steps > len(s.Documents) {
				return false
			}
			at = owner[at.doc]
		}
		if at.node < 0 || at.node >= len(region[0]) {
			return false
		}
		if region[0][at.node] < 0 {
			region[0][at.node] = len(*top)
			*top = append(*top, at.node)
		}
	}
	return true
}

// docFrames returns the frame ids of the snapshot's documents but the top one.
func (s *snapshot) docFrames() (ids []string, ok bool) {
	for _, d := range s.Documents[1:] {
		id, ok := s.str(d.FrameID)
		if !ok || id == "" {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// place sets the regions of the top document doc's secrets (region, by node; top, the
// node of each region's root) from its layout: each box that draws something, grown
// by what its shadows and its ancestors' filters paint beyond it (inks, own), and each
// reflection that copies it; and the roots' backend node ids. A region that draws
// nothing is left out. ok is false for a layout it cannot read.
func (out *Secrets) place(doc snapshotDocument, region, top []int, inks []ink, own []outset, sel []string) (ok bool) {
	if len(doc.Layout.NodeIndex) != len(doc.Layout.Bounds) {
		return false
	}
	out.Regions = make([][]Rect, len(top))
	// The border box of each region's root, when it has exactly one.
	rootBox := make([]Rect, len(top))
	boxes := make([]int, len(top))
	rootOf := make(map[int]int, len(top))
	for k, n := range top {
		rootOf[n] = k
	}
	for j, n := range doc.Layout.NodeIndex {
		if k, ok := rootOf[n]; ok && j < len(doc.Layout.Bounds) && len(doc.Layout.Bounds[j]) == 4 {
			b := doc.Layout.Bounds[j]
			rootBox[k] = Rect{b[0], b[1], b[2], b[3]}
			boxes[k]++
		}
	}
	inBox := make([]bool, len(top))
	for k := range top {
		inBox[k] = boxes[k] == 1
	}
	for j, n := range doc.Layout.NodeIndex {
		if n < 0 || n >= len(region) {
			return false
		}
		k := region[n]
		if k < 0 {
			continue
		}
		b := doc.Layout.Bounds[j]
		if len(b) != 4 || slices.ContainsFunc(b, func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }) {
			return false
		}
		if b[2] > 0 && b[3] > 0 {
			in := inks[n]
			r := Rect{b[0], b[1], b[2], b[3]}.grow(in.reach.add(own[n]))
			out.Regions[k] = append(out.Regions[k], r)
			if len(in.mirrors) > 0 || in.whole || !rootBox[k].holds(Rect{b[0], b[1], b[2], b[3]}.grow(in.reach.add(in.text))) {
				inBox[k] = false
			}
			for _, m := range in.mirrors {
				out.Regions[k] = append(out.Regions[k], m.r.mirror(m.box))
			}
			out.Whole = out.Whole || in.whole
		}
	}
	if len(doc.Nodes.BackendNodeID) != 0 {
		for k, n := range top {
			if len(out.Regions[k]) > 0 {
				out.Roots = append(out.Roots, doc.Nodes.BackendNodeID[n])
				out.inBox = append(out.inBox, inBox[k])
				out.selectors = append(out.selectors, sel[k])
			}
		}
	}
	out.Regions = slices.DeleteFunc(out.Regions, func(r []Rect) bool { return len(r) == 0 })
	return true
}

// secretUses makes secret every SVG <use> of doc (the top document) that draws a copy
// of a secret element or of one that holds a secret (region, by node; -1 for none),
// adding a region for each to top. A <use> of such a <use> is one too.
func secretUses(doc snapshotDocument, str func(int) (string, bool), region []int, top *[]int) error {
	nodes := doc.Nodes
	n := len(nodes.ParentIndex)
	attr := func(i int, name string) (string, bool) {
		a := nodes.Attributes[i]
		for k := 0; k+1 < len(a); k += 2 {
			if an, _ := str(a[k]); strings.EqualFold(an, name) {
				v, ok := str(a[k+1])
				return v, ok
			}
		}
		return "", false
	}
	var uses []int
	ids := map[string][]int{}
	for i := range n {
		name, ok := str(nodes.NodeName[i])
		if !ok {
			return errSnapshot
		}
		if strings.EqualFold(name, "use") {
			uses = append(uses, i)
		}
		if id, ok := attr(i, "id"); ok && id != "" {
			ids[id] = append(ids[id], i)
		}
	}
	if len(uses) == 0 {
		return nil
	}
	for changed := true; changed; {
		changed = false
		// holds[i]: node i is secret or has a secret descendant.
		holds := make([]bool, n)
		for i := n - 1; i >= 0; i-- {
			holds[i] = holds[i] || region[i] >= 0
			if p := nodes.ParentIndex[i]; p >= 0 && holds[i] {
				holds[p] = true
			}
		}
		for _, u := range uses {
			if region[u] >= 0 {
				continue
			}
			href, ok := attr(u, "href")
			if !ok {
				href, _ = attr(u, "xlink:href")
			}
			target, local := strings.CutPrefix(strings.TrimSpace(href), "#")
			if !local {
				continue // another document's element: not this page's secret
			}
			for _, t := range ids[target] {
				if holds[t] {
					region[u] = len(*top)
					*top = append(*top, u)
					changed = true
					break
				}
			}
		}
	}
	return nil
}

// hasSecretLayout reports whether a secret node of doc draws anything.
func hasSecretLayout(doc snapshotDocument, region []int) bool {
	for j, n := range doc.Layout.NodeIndex {
		if n >= 0 && n < len(region) && region[n] >= 0 && j < len(doc.Layout.Bounds) {
			if b := doc.Layout.Bounds[j]; len(b) == 4 && b[2] > 0 && b[3] > 0 {
				return true
			}
		}
	}
	return false
}

// labelledSecrets returns the nodes of doc that a label names as secret (saysSecret of
// its text): the element whose id its for attribute names, or, without one, every
// element inside it. ok is false when an index is out of the string table.
func labelledSecrets(doc snapshotDocument, str func(int) (string, bool)) (labelled map[int]bool, ok bool) {
	nodes := doc.Nodes
	n := len(nodes.ParentIndex)
	if len(nodes.NodeValue) != 0 && len(nodes.NodeValue) != n {
		return nil, false
	}
	label := make([]int, n) // the nearest label element around node i (itself included), or -1
	var labels []int
	for i := range n {
		label[i] = -1
		if p := nodes.ParentIndex[i]; p >= 0 && p < i {
			label[i] = label[p]
		}
		name, ok := str(nodes.NodeName[i])
		if !ok {
			return nil, false
		}
		if strings.EqualFold(name, "label") {
			label[i] = i
			labels = append(labels, i)
		}
	}
	if len(labels) == 0 {
		return nil, true
	}
	text := make(map[int][]byte, len(labels))
	for i := range n {
		if l := label[i]; l >= 0 && l != i && len(nodes.NodeValue) == n && len(text[l]) < maxLabelBytes {
			v, ok := str(nodes.NodeValue[i])
			if !ok {
				return nil, false
			}
			text[l] = append(append(text[l], ' '), v...)
		}
	}
	ids := map[string]bool{} // ids named by the for attribute of a secret label
	inside := map[int]bool{} // secret labels without one
	for _, l := range labels {
		if !saysSecret(string(text[l])) {
			continue
		}
		attrs := nodes.Attributes[l]
		target := ""
		for k := 0; k+1 < len(attrs); k += 2 {
			if a, _ := str(attrs[k]); strings.EqualFold(a, "for") {
				target, _ = str(attrs[k+1])
			}
		}
		if target != "" {
			ids[target] = true
		} else {
			inside[l] = true
		}
	}
	labelled = map[int]bool{}
	for i := range n {
		if label[i] >= 0 && inside[label[i]] {
			labelled[i] = true
		}
		if len(ids) == 0 {
			continue
		}
		attrs := nodes.Attributes[i]
		for k := 0; k+1 < len(attrs); k += 2 {
			if a, _ := str(attrs[k]); strings.EqualFold(a, "id") {
				if v, _ := str(attrs[k+1]); ids[v] {
					labelled[i] = true
				}
			}
		}
	}
	return labelled, true
}
