package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/wire"
)

// What is masked. An element is secret when it is
//   - a form control (input, textarea, select, or an element made editable with
//     contenteditable) whose autocomplete names a password, a one-time code or any
//     cc-* (payment card) field;
//   - an input or textarea whose type is password, or whose name, id, aria-label,
//     placeholder or label says it holds one (secretWords: a "show password" toggle
//     turns a password field into type=text and keeps its name);
//   - marked private for session-replay tools: one of MaskAttributes (any value), one
//     of MaskClasses, data-dd-privacy="mask", "hidden" or "mask-user-input",
//     data-clarity-mask="true", and the deployment's extra attributes and classes
//     ([Config.MaskAttributes], [Config.MaskClasses]). Attribute and class names are
//     compared ASCII case-insensitively: a selector matches a class so in a quirks-mode
//     page, so this masks at least what each of those tools masks;
//   - an iframe whose allow attribute grants payment (how shops embed card entry).
//
// A secret element's descendants are secret too, and a document inside an iframe of
// the page's process that holds a secret masks the whole iframe of the top document.
// A frame of another process is read into and its secrets placed where it draws them
// (frames.go).
var (
	// MaskAttributes are the attributes that mark an element private, whatever their
	// value: rrweb/LogRocket, Hotjar, OpenReplay, Sentry, Smartlook, Heap and the
	// common data-sensitive.
	MaskAttributes = []string{
		"data-private", "data-sensitive", "data-hj-suppress", "data-openreplay-masked",
		"data-sentry-block", "data-sentry-mask", "data-recording-sensitive",
		"data-recording-disable", "data-heap-redact-text",
	}
	// MaskClasses are the classes that mark an element private: rrweb, FullStory,
	// PostHog, Sentry, LogRocket, Datadog and Heap.
	MaskClasses = []string{
		"rr-block", "rr-mask", "fs-exclude", "fs-mask", "ph-no-capture", "sentry-block",
		"sentry-mask", "_lr-hide", "dd-privacy-mask", "dd-privacy-hidden",
		"dd-privacy-mask-user-input", "heap-ignore",
	}
)

// secretAutocomplete are the autocomplete tokens of secret fields, besides any cc-*.
var secretAutocomplete = []string{"current-password", "new-password", "one-time-code"}

// secretWords decide whether a text field's name, id, aria-label, placeholder or label
// says it holds a secret. The text is lower-cased; it is secret when it contains one of
// secretWords.within anywhere, or one of secretWords.whole as a word of its own (words
// split at every character that is not a letter or a digit, and between a lower-case
// and an upper-case letter: "userPwd" is "user pwd").
var secretWords = struct{ within, whole []string }{
	within: []string{
		"password", "passwd", "passphrase", "passcode", "onetime", "one-time", "one_time",
		"securitycode", "security-code", "security_code", "security code", "пароль",
	},
	whole: []string{"pass", "pwd", "pin", "otp", "cvc", "cvc2", "cvv", "cvv2", "csc", "cvn", "пин"},
}

// maskDDPrivacy are the values of data-dd-privacy that mask (Datadog).
var maskDDPrivacy = []string{"mask", "hidden", "mask-user-input"}

// notTextInputs are the input types that hold no typed text: a password rule by name
// never masks them (a "Show password" checkbox is not a secret).
var notTextInputs = []string{"hidden", "checkbox", "radio", "submit", "button", "reset", "image", "file", "range", "color"}

// Bounds of the deployment's extra mask names.
const (
	// MaxMaskNames bounds the extra attributes, and the extra classes, of a deployment.
	MaxMaskNames = 32
	// MaxMaskNameBytes bounds one extra attribute or class name.
	MaxMaskNameBytes = 128
	// maskPadding widens every mask by this many image pixels on each side, beyond
	// rounding outwards: antialiased edges, focus rings and a layout that moved by a
	// fraction of a pixel between the read and the capture stay covered.
	maskPadding = 2
)

// maskRules is what a snapshot is matched against.
type maskRules struct {
	attributes []string // lower case
	classes    []string
	// opaqueFrames masks whole every frame element (frameElements) whose document
	// neither the snapshot nor a read into it (frames.go) holds.
	opaqueFrames bool
}

// frameElements are the elements that draw another document.
var frameElements = []string{"iframe", "frame", "fencedframe", "object", "embed", "portal"}

// newMaskRules returns the built-in rules with the deployment's extras.
func newMaskRules(attributes, classes []string) maskRules {
	r := maskRules{
		attributes:   slices.Clone(MaskAttributes),
		classes:      slices.Clone(MaskClasses),
		opaqueFrames: true,
	}
	for _, a := range attributes {
		r.attributes = append(r.attributes, strings.ToLower(a))
	}
	r.classes = append(r.classes, classes...)
	return r
}

// validMaskName reports whether name may be an extra attribute or class: non-empty,
// bounded, printable ASCII without whitespace, quotes or '=' (an attribute name or a
// class token, not a selector).
func validMaskName(name string) bool {
	if name == "" || len(name) > MaxMaskNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '=' || c == '<' || c == '>' || c == '/' {
			return false
		}
	}
	return true
}

// ParseMaskSwitch reads a deployment's AGENTFY_MASK: "on" masks (the default), "off"
// turns masking off (noMask, [Config.NoMask]); anything else is refused.
func ParseMaskSwitch(v string) (noMask bool, err error) {
	switch v {
	case "on":
		return false, nil
	case "off":
		return true, nil
	}
	return false, fmt.Errorf("%q, want on or off", v)
}

// ParseMaskNames reads a deployment's list of extra attribute or class names: comma
// separated, spaces around a name ignored. It refuses a name validMaskName refuses and
// more than MaxMaskNames names.
func ParseMaskNames(list string) ([]string, error) {
	var names []string
	for _, n := range strings.Split(list, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if !validMaskName(n) {
			return nil, errMaskName(n)
		}
		names = append(names, n)
	}
	if len(names) > MaxMaskNames {
		return nil, fmt.Errorf("%d names, at most %d", len(names), MaxMaskNames)
	}
	return names, nil
}

// errMaskName is the error for a name validMaskName refuses.
func errMaskName(name string) error {
	return fmt.Errorf("%q is not a name (printable ASCII, no space, quote, '=', '<', '>' or '/', at most %d bytes)", name, MaxMaskNameBytes)
}

// errSnapshot is a snapshot the broker cannot read. It names nothing of the page: a
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

// snapshotRequest reads the DOM, its layout and the computed styles that paint ink
// outside a box (inkStyles), and nothing else: no paint order, no rectangles beyond
// the layout's bounds. Chromium runs no script of the page for it and changes nothing
// in it (it brings the layout up to date, as a paint would). DOMSnapshot.enable is
// never called: no events follow.
var snapshotRequest = proto.DOMSnapshotCaptureSnapshot{ComputedStyles: inkStyles}

// rect is a rectangle in CSS pixels of the top document.
type rect struct{ X, Y, W, H float64 }

// secrets are the secret regions of a snapshot: for each secret element of the top
// document (or iframe of it holding one), the layout rectangles that draw it and its
// descendants, in document order.
type secrets struct {
	regions [][]rect
	// whole says a secret's ink cannot be placed (an SVG filter, a perspective, a
	// shadow a screen away): the frame is masked whole.
	whole bool
	// roots are the backend node ids of the elements of the top document the regions
	// are placed on (a secret element, or the frame that holds one).
	roots []int
	// scroll and content size of the top document, which must not move between the
	// read and the capture.
	scrollX, scrollY, width, height float64
	// svgFilter says the top document has a filter that may draw any element anywhere
	// (inkOf): a secret placed later, in a frame, masks the frame whole too.
	svgFilter bool
	// frames are the frame elements of the top document whose document the snapshot
	// does not hold (an out-of-process iframe, an embed), until placeFrames decides
	// what each masks (frames.go).
	frames []opaqueFrame
	// placed are the frames whose secrets were placed from their own documents.
	placed []placedFrame
	// clear are the frames of another process read into that hold no secret: one that
	// runs a view transition may paint an image of one it held (frames.go).
	clear []clearFrame
	// docFrames are the frames of the snapshot's other documents (of the same process):
	// the same holds for them.
	docFrames []proto.PageFrameID
}

// equal reports whether two reads found the same secrets at the same places.
func (s secrets) equal(o secrets) bool {
	return s.scrollX == o.scrollX && s.scrollY == o.scrollY && s.width == o.width && s.height == o.height && s.whole == o.whole &&
		slices.EqualFunc(s.regions, o.regions, slices.Equal)
}

// findSecrets parses a DOMSnapshot.captureSnapshot result and returns its secret
// regions, each frame it cannot read into masked whole (rules.opaqueFrames) or shown.
// Anything it cannot make sense of fails (errSnapshot): a snapshot that might hide a
// secret is never read as one without.
func findSecrets(raw []byte, rules maskRules) (secrets, error) {
	sec, err := parseSecrets(raw, rules)
	if err != nil {
		return secrets{}, err
	}
	return placeFrames(sec, nil, rules), nil
}

// parseSecrets is findSecrets with the top document's opaque frames left in frames,
// for the caller to read into (frames.go) before placeFrames.
func parseSecrets(raw []byte, rules maskRules) (secrets, error) {
	var s snapshot
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Documents) == 0 {
		return secrets{}, errSnapshot
	}
	owner, ok := s.owners()
	if !ok {
		return secrets{}, errSnapshot
	}
	region, top, opaque, ok := s.secretNodes(rules)
	if !ok || !s.maskOwners(owner, region, &top) {
		return secrets{}, errSnapshot
	}
	docFrames, ok := s.docFrames()
	if !ok {
		return secrets{}, errSnapshot
	}
	doc := s.Documents[0]
	// An SVG <use> draws a copy of the element it names where the <use> is: when that
	// element is secret, so is the <use>.
	if err := secretUses(doc, s.str, region[0], &top); err != nil {
		return secrets{}, err
	}
	inks, own, anyURLFilter, ok := inkOf(doc, s.str)
	if !ok {
		return secrets{}, errSnapshot
	}
	if len(doc.Nodes.BackendNodeID) != 0 && len(doc.Nodes.BackendNodeID) != len(doc.Nodes.ParentIndex) {
		return secrets{}, errSnapshot
	}
	out := secrets{
		whole:     anyURLFilter && len(top) > 0,
		svgFilter: anyURLFilter,
		scrollX:   doc.ScrollOffsetX, scrollY: doc.ScrollOffsetY,
		width: doc.ContentWidth, height: doc.ContentHeight,
		docFrames: docFrames,
	}
	if !out.place(doc, region[0], top, inks, own) {
		return secrets{}, errSnapshot
	}
	if out.frames, ok = opaqueFrames(doc, opaque, inks, own); !ok {
		return secrets{}, errSnapshot
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
// whose document the snapshot does not hold (placeFrames decides). A frame element
// without its document inside another document is secret when rules.opaqueFrames.
func (s *snapshot) secretNodes(rules maskRules) (region [][]int, top, opaque []int, ok bool) {
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
						// Read into it, or masked whole, by placeFrames.
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
func (s *snapshot) docFrames() (ids []proto.PageFrameID, ok bool) {
	for _, d := range s.Documents[1:] {
		id, ok := s.str(d.FrameID)
		if !ok || id == "" {
			return nil, false
		}
		ids = append(ids, proto.PageFrameID(id))
	}
	return ids, true
}

// place sets the regions of the top document doc's secrets (region, by node; top, the
// node of each region's root) from its layout: each box that draws something, grown
// by what its shadows and its ancestors' filters paint beyond it (inks, own), and each
// reflection that copies it; and the roots' backend node ids. A region that draws
// nothing is left out. ok is false for a layout it cannot read.
func (out *secrets) place(doc snapshotDocument, region, top []int, inks []ink, own []outset) (ok bool) {
	if len(doc.Layout.NodeIndex) != len(doc.Layout.Bounds) {
		return false
	}
	out.regions = make([][]rect, len(top))
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
			r := rect{b[0], b[1], b[2], b[3]}.grow(in.reach.add(own[n]))
			out.regions[k] = append(out.regions[k], r)
			for _, m := range in.mirrors {
				out.regions[k] = append(out.regions[k], m.r.mirror(m.box))
			}
			out.whole = out.whole || in.whole
		}
	}
	if len(doc.Nodes.BackendNodeID) != 0 {
		for k, n := range top {
			if len(out.regions[k]) > 0 {
				out.roots = append(out.roots, doc.Nodes.BackendNodeID[n])
			}
		}
	}
	out.regions = slices.DeleteFunc(out.regions, func(r []rect) bool { return len(r) == 0 })
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

// isSecret reports whether an element is secret by its own name and attributes, or
// because a label says so (labelled); ok is false when an index is out of the string
// table.
func isSecret(nameIdx int, attrs []int, str func(int) (string, bool), rules maskRules, labelled bool) (secret, ok bool) {
	name, ok := str(nameIdx)
	if !ok {
		return false, false
	}
	if len(attrs)%2 != 0 {
		return false, false
	}
	text := strings.EqualFold(name, "input") || strings.EqualFold(name, "textarea")
	control := text || strings.EqualFold(name, "select")
	iframe := strings.EqualFold(name, "iframe")
	named, notText := labelled, false
	for k := 0; k < len(attrs); k += 2 {
		a, ok1 := str(attrs[k])
		v, ok2 := str(attrs[k+1])
		if !ok1 || !ok2 {
			return false, false
		}
		a = strings.ToLower(a)
		if a == "contenteditable" && !strings.EqualFold(strings.TrimSpace(v), "false") {
			control = true
		}
	}
	for k := 0; k < len(attrs); k += 2 {
		a, _ := str(attrs[k])
		v, _ := str(attrs[k+1])
		a = strings.ToLower(a)
		switch {
		case slices.Contains(rules.attributes, a):
			secret = true
		case a == "class":
			for _, c := range strings.Fields(v) {
				if slices.ContainsFunc(rules.classes, func(m string) bool { return strings.EqualFold(c, m) }) {
					secret = true
				}
			}
		case a == "data-dd-privacy":
			secret = secret || slices.Contains(maskDDPrivacy, strings.ToLower(strings.TrimSpace(v)))
		case a == "data-clarity-mask":
			secret = secret || strings.EqualFold(strings.TrimSpace(v), "true")
		case text && a == "type":
			t := strings.ToLower(strings.TrimSpace(v))
			secret = secret || t == "password"
			notText = slices.Contains(notTextInputs, t)
		case text && (a == "name" || a == "id" || a == "aria-label" || a == "placeholder"):
			named = named || saysSecret(v)
		case control && a == "autocomplete":
			for _, t := range strings.Fields(strings.ToLower(v)) {
				if strings.HasPrefix(t, "cc-") || slices.Contains(secretAutocomplete, t) {
					secret = true
				}
			}
		case iframe && a == "allow":
			for _, directive := range strings.Split(v, ";") {
				if f := strings.Fields(directive); len(f) > 0 && strings.EqualFold(f[0], "payment") {
					secret = true
				}
			}
		}
	}
	return secret || (text && named && !notText), true
}

// saysSecret reports whether a field's name, id, aria-label, placeholder or label text
// says it holds a secret (secretWords).
func saysSecret(v string) bool {
	if len(v) > maxLabelBytes {
		v = v[:maxLabelBytes]
	}
	// Split camelCase before lower-casing: "userPwd" is "user Pwd".
	var b strings.Builder
	prevLower := false
	for _, r := range v {
		if prevLower && unicode.IsUpper(r) {
			b.WriteByte(' ')
		}
		prevLower = unicode.IsLower(r)
		b.WriteRune(r)
	}
	lower := strings.ToLower(b.String())
	for _, w := range secretWords.within {
		if strings.Contains(lower, w) {
			return true
		}
	}
	for _, w := range strings.FieldsFunc(lower, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if slices.Contains(secretWords.whole, w) {
			return true
		}
	}
	return false
}

// maxLabelBytes bounds the text of a label (or a name) read for saysSecret.
const maxLabelBytes = 256

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

// maskBoxes places the secret regions on an image of w × h pixels of clip: each
// region's rectangles, scaled, rounded outwards, padded and clamped to the image. It
// returns the boxes to paint and how many regions show in the image.
func maskBoxes(sec secrets, clip *proto.PageViewport, w, h int) (boxes []image.Rectangle, shown int) {
	if clip == nil || !(clip.Width > 0) || !(clip.Height > 0) {
		return nil, 0
	}
	if sec.whole {
		// A secret whose ink cannot be placed: the whole frame is one mask, and every
		// region counts as masked.
		return []image.Rectangle{image.Rect(0, 0, w, h)}, min(max(len(sec.regions), 1), wire.MaxMasked)
	}
	kx, ky := float64(w)/clip.Width, float64(h)/clip.Height
	for _, region := range sec.regions {
		seen := false
		for _, r := range region {
			// Rounded outwards and padded, then clamped to the image.
			b := image.Rectangle{
				Min: image.Pt(
					max(int(math.Floor((r.X-clip.X)*kx))-maskPadding, 0),
					max(int(math.Floor((r.Y-clip.Y)*ky))-maskPadding, 0)),
				Max: image.Pt(
					min(int(math.Ceil((r.X+r.W-clip.X)*kx))+maskPadding, w),
					min(int(math.Ceil((r.Y+r.H-clip.Y)*ky))+maskPadding, h)),
			}
			if b.Min.X >= b.Max.X || b.Min.Y >= b.Max.Y {
				continue
			}
			boxes = append(boxes, b)
			seen = true
		}
		if seen {
			shown++
		}
	}
	return boxes, min(shown, wire.MaxMasked)
}

// sameViewport reports whether two reads of the layout metrics saw the same viewport
// at the same scroll position.
func sameViewport(a, b *proto.PageGetLayoutMetricsResult) bool {
	if a == nil || b == nil || a.CSSVisualViewport == nil || b.CSSVisualViewport == nil ||
		a.CSSLayoutViewport == nil || b.CSSLayoutViewport == nil {
		return false
	}
	va, vb := *a.CSSVisualViewport, *b.CSSVisualViewport
	va.Zoom, vb.Zoom = nil, nil
	return va == vb && *a.CSSLayoutViewport == *b.CSSLayoutViewport
}

// scrolledAs reports whether a snapshot's top document is scrolled where the layout
// metrics' visual viewport is (within a pixel: one reports the layout viewport in
// whole pixels).
func scrolledAs(s secrets, m *proto.PageGetLayoutMetricsResult) bool {
	vv := m.CSSVisualViewport
	if vv == nil {
		return false
	}
	return math.Abs(s.scrollX-(vv.PageX-vv.OffsetX)) <= 1 && math.Abs(s.scrollY-(vv.PageY-vv.OffsetY)) <= 1
}

// spanSecrets returns where to mask a screenshot taken between two reads a and b of a
// page at the same viewport and scroll position: a when they agree; otherwise every
// place a secret could have been painted between them, each rectangle of a region the
// box that spans it in a and in b (a secret that moved is masked along its way). ok is
// false when the reads cannot be related rectangle to rectangle: not the same secret
// elements (one appeared or left the page, or stopped drawing), not the same scroll
// position, or not the same frames' secrets placed from their own documents.
func spanSecrets(a, b secrets) (sec secrets, ok bool) {
	if a.equal(b) {
		return a, true
	}
	if len(a.regions) != len(b.regions) || !slices.Equal(a.roots, b.roots) ||
		a.scrollX != b.scrollX || a.scrollY != b.scrollY ||
		!slices.EqualFunc(a.placed, b.placed, func(p, q placedFrame) bool { return p.from == q.from && p.to == q.to }) {
		return secrets{}, false
	}
	sec = a
	sec.whole = a.whole || b.whole
	sec.regions = make([][]rect, len(a.regions))
	for k := range a.regions {
		sec.regions[k] = spanRects(a.regions[k], b.regions[k])
	}
	// A frame masked whole later (its secrets move) is masked where it was in either.
	sec.placed = slices.Clone(a.placed)
	for i := range sec.placed {
		sec.placed[i].frame.rects = spanRects(a.placed[i].frame.rects, b.placed[i].frame.rects)
	}
	return sec, true
}

// spanRects returns rectangles that cover a, b and what lies between them: the box
// spanning a[i] and b[i] for each i when they have as many rectangles (a region's
// rectangles come in the order of its nodes), else one box spanning them all.
func spanRects(a, b []rect) []rect {
	if len(a) == len(b) {
		out := make([]rect, len(a))
		for i := range a {
			out[i] = a[i].span(b[i])
		}
		return out
	}
	all := append(slices.Clone(a), b...)
	if len(all) == 0 {
		return nil
	}
	box := all[0]
	for _, r := range all[1:] {
		box = box.span(r)
	}
	return []rect{box}
}

// span returns the smallest rectangle that holds r and o.
func (r rect) span(o rect) rect {
	x0, y0 := min(r.X, o.X), min(r.Y, o.Y)
	x1, y1 := max(r.X+r.W, o.X+o.W), max(r.Y+r.H, o.Y+o.H)
	return rect{x0, y0, x1 - x0, y1 - y0}
}

// maskError wraps a failure of the masking reads.
func maskError(step string, err error) error {
	return fmt.Errorf("mask: %s: %w", step, err)
}
