package masks

import (
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"slices"
	"testing"
)

// snap builds DOMSnapshot.captureSnapshot results for the tests.
type snap struct {
	strings []string
	docs    []map[string]any
}

// str interns s and returns its index.
func (s *snap) str(v string) int {
	if i := slices.Index(s.strings, v); i >= 0 {
		return i
	}
	s.strings = append(s.strings, v)
	return len(s.strings) - 1
}

// node is one node of a test document: its parent, name and attributes (name,
// value, …; a value "\x00" is none, -1), and its layout bounds if it has any.
type node struct {
	parent int
	name   string
	attrs  []string
	bounds []float64
	child  int               // content document index, 0 for none
	value  string            // a text node's value
	style  map[string]string // computed inkStyles of a node with a layout ("none" unless set)
}

func (s *snap) doc(nodes ...node) {
	d := map[string]any{}
	var parents, names, values []int
	attrs := [][]int{}
	var layoutNodes []int
	bounds := [][]float64{}
	styles := [][]int{}
	styled := false
	cdi := map[string][]int{"index": {}, "value": {}}
	for i, n := range nodes {
		parents = append(parents, n.parent)
		names = append(names, s.str(n.name))
		if n.value != "" {
			values = append(values, s.str(n.value))
		} else {
			values = append(values, -1)
		}
		a := []int{}
		for _, v := range n.attrs {
			if v == "\x00" {
				a = append(a, -1)
			} else {
				a = append(a, s.str(v))
			}
		}
		attrs = append(attrs, a)
		if n.bounds != nil {
			layoutNodes = append(layoutNodes, i)
			bounds = append(bounds, n.bounds)
			st := make([]int, len(inkStyles))
			for k, name := range inkStyles {
				v, ok := n.style[name]
				if !ok {
					v = map[bool]string{true: "1", false: "none"}[name == "zoom"]
				}
				st[k] = s.str(v)
			}
			styles = append(styles, st)
			styled = styled || n.style != nil
		}
		if n.child > 0 {
			cdi["index"] = append(cdi["index"], i)
			cdi["value"] = append(cdi["value"], n.child)
		}
	}
	d["nodes"] = map[string]any{"parentIndex": parents, "nodeName": names, "nodeValue": values, "attributes": attrs, "contentDocumentIndex": cdi}
	d["layout"] = map[string]any{"nodeIndex": layoutNodes, "bounds": bounds}
	if styled {
		d["layout"].(map[string]any)["styles"] = styles
	}
	d["scrollOffsetX"], d["scrollOffsetY"], d["contentWidth"], d["contentHeight"] = 0, 100, 1265, 3000
	d["frameId"] = s.str(fmt.Sprintf("FRAME%d", len(s.docs)))
	s.docs = append(s.docs, d)
}

func (s *snap) json(tb testing.TB) []byte {
	tb.Helper()
	b, err := json.Marshal(map[string]any{"documents": s.docs, "strings": s.strings})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// oneElement is a snapshot of a page whose body holds one element with a layout.
func oneElement(name string, attrs ...string) *snap {
	s := &snap{}
	s.doc(
		node{parent: -1, name: "#document", bounds: []float64{0, 0, 1280, 800}},
		node{parent: 0, name: "HTML"},
		node{parent: 1, name: "BODY", bounds: []float64{0, 0, 1265, 3000}},
		node{parent: 2, name: name, attrs: attrs, bounds: []float64{10, 20, 200, 40}},
	)
	return s
}

func TestMaskRules(t *testing.T) {
	rules := NewRules([]string{"Data-Secret"}, []string{"pii"}, true) // the iframes here hold no document: TestOpaqueFrames
	for _, c := range []struct {
		name   string
		attrs  []string
		secret bool
	}{
		{"INPUT", []string{"type", "password"}, true},
		{"INPUT", []string{"type", " PassWord "}, true},
		{"TEXTAREA", []string{"type", "password"}, true},
		{"INPUT", []string{"type", "text"}, false},
		{"INPUT", []string{"type", "text", "autocomplete", "current-password"}, true},
		{"INPUT", []string{"autocomplete", "new-password"}, true},
		{"INPUT", []string{"autocomplete", "one-time-code"}, true},
		{"INPUT", []string{"autocomplete", "section-a billing cc-number"}, true},
		{"INPUT", []string{"autocomplete", "CC-EXP"}, true},
		{"INPUT", []string{"autocomplete", "cc-csc"}, true},
		{"INPUT", []string{"autocomplete", "username"}, false},
		{"INPUT", []string{"autocomplete", "email"}, false},
		{"SPAN", []string{"autocomplete", "cc-number"}, false}, // only fields
		{"SPAN", []string{"type", "password"}, false},
		{"DIV", []string{"data-private", "\x00"}, true},
		{"DIV", []string{"data-private", "false"}, true}, // presence marks it, whatever the value
		{"DIV", []string{"data-sensitive", ""}, true},
		{"DIV", []string{"data-hj-suppress", "\x00"}, true},
		{"DIV", []string{"data-openreplay-masked", "\x00"}, true},
		{"DIV", []string{"class", "a rr-block b"}, true},
		{"DIV", []string{"class", "rr-mask"}, true},
		{"DIV", []string{"class", "x\tfs-exclude"}, true},
		{"DIV", []string{"class", "ph-no-capture"}, true},
		{"DIV", []string{"class", "rr-blocked not-rr-block"}, false}, // whole tokens only
		{"DIV", []string{"data-dd-privacy", "mask"}, true},
		{"DIV", []string{"data-dd-privacy", "hidden"}, true},
		{"DIV", []string{"data-dd-privacy", "allow"}, false},
		{"DIV", []string{"data-clarity-mask", "True"}, true},
		{"DIV", []string{"data-clarity-mask", "false"}, false},
		{"DIV", []string{"data-secret", "\x00"}, true}, // the deployment's, matched in lower case
		{"DIV", []string{"class", "card pii"}, true},
		{"DIV", []string{"class", "PII"}, true}, // classes compared case-insensitively, as a quirks-mode selector does
		{"DIV", []string{"class", "RR-Block"}, true},
		// Sentry, FullStory, LogRocket, Datadog, Smartlook, Heap.
		{"DIV", []string{"class", "sentry-block"}, true},
		{"DIV", []string{"class", "Sentry-Mask"}, true},
		{"DIV", []string{"data-sentry-block", "\x00"}, true},
		{"DIV", []string{"DATA-SENTRY-MASK", ""}, true},
		{"DIV", []string{"class", "fs-mask"}, true},
		{"DIV", []string{"class", "_lr-hide"}, true},
		{"DIV", []string{"class", "dd-privacy-mask-user-input"}, true},
		{"DIV", []string{"data-dd-privacy", "mask-user-input"}, true},
		{"DIV", []string{"data-dd-privacy", " MASK-USER-INPUT"}, true},
		{"DIV", []string{"data-recording-sensitive", "\x00"}, true},
		{"DIV", []string{"data-heap-redact-text", "\x00"}, true},
		{"DIV", []string{"class", "sentry-unmask fs-unmask"}, false},
		// Every cc-* on any form control, contenteditable included.
		{"SELECT", []string{"autocomplete", "cc-exp-month"}, true},
		{"SELECT", []string{"autocomplete", "country"}, false},
		{"DIV", []string{"contenteditable", "", "autocomplete", "cc-number"}, true},
		{"DIV", []string{"contenteditable", "true", "autocomplete", "one-time-code"}, true},
		{"DIV", []string{"contenteditable", "false", "autocomplete", "cc-number"}, false},
		// A text field whose name, id, aria-label or placeholder says password, one-time
		// code or CVC: a "show password" toggle makes it type=text and keeps its name.
		{"INPUT", []string{"type", "text", "name", "password"}, true},
		{"INPUT", []string{"id", "userPassword"}, true},
		{"INPUT", []string{"name", "user_pwd"}, true},
		{"INPUT", []string{"id", "loginPwd"}, true},
		{"INPUT", []string{"name", "pass"}, true},
		{"INPUT", []string{"aria-label", "Пароль"}, true},
		{"INPUT", []string{"placeholder", "CVV2"}, true},
		{"INPUT", []string{"name", "card[cvc]"}, true},
		{"INPUT", []string{"name", "otp-code"}, true},
		{"INPUT", []string{"id", "one-time"}, true},
		{"TEXTAREA", []string{"name", "passphrase"}, true},
		{"INPUT", []string{"name", "passport"}, false},
		{"INPUT", []string{"name", "passenger"}, false},
		{"INPUT", []string{"name", "spinner"}, false},
		{"INPUT", []string{"name", "username"}, false},
		{"INPUT", []string{"type", "checkbox", "id", "show-password"}, false},
		{"INPUT", []string{"type", "hidden", "name", "password_reset_token"}, false},
		{"SPAN", []string{"id", "password"}, false}, // only text fields
		{"IFRAME", []string{"allow", "payment"}, true},
		{"IFRAME", []string{"allow", "camera; payment 'self' https://pay.example"}, true},
		{"IFRAME", []string{"allow", "camera 'none'; fullscreen"}, false},
		{"IFRAME", []string{"allow", "paymentish"}, false},
		{"DIV", []string{"allow", "payment"}, false},
		{"DIV", []string{"id", "password", "title", "cc-number"}, false},
		{"DIV", []string{"autocomplete", "cc-number"}, false},
	} {
		sec, err := findSecrets(oneElement(c.name, c.attrs...).json(t), rules)
		if err != nil {
			t.Fatalf("%s %q: %v", c.name, c.attrs, err)
		}
		if got := len(sec.Regions) == 1; got != c.secret {
			t.Errorf("%s %q: secret %t, want %t", c.name, c.attrs, got, c.secret)
		}
	}
}

// TestLabelledSecrets: a text field is secret when a label says so — the one its for
// attribute names, or the fields inside it — and a label saying something else masks
// nothing.
func TestLabelledSecrets(t *testing.T) {
	s := &snap{}
	s.doc(
		node{parent: -1, name: "#document", bounds: []float64{0, 0, 1280, 800}},                                            // 0
		node{parent: 0, name: "HTML"},                                                                                      // 1
		node{parent: 1, name: "BODY", bounds: []float64{0, 0, 1265, 3000}},                                                 // 2
		node{parent: 2, name: "LABEL", attrs: []string{"for", "f1"}},                                                       // 3
		node{parent: 3, name: "#text", value: "Your password"},                                                             // 4
		node{parent: 2, name: "INPUT", attrs: []string{"id", "f1"}, bounds: []float64{0, 10, 100, 20}},                     // 5: named by 3
		node{parent: 2, name: "LABEL"},                                                                                     // 6
		node{parent: 6, name: "SPAN"},                                                                                      // 7
		node{parent: 7, name: "#text", value: "Код CVC"},                                                                   // 8
		node{parent: 6, name: "INPUT", bounds: []float64{0, 40, 100, 20}},                                                  // 9: inside 6
		node{parent: 2, name: "LABEL", attrs: []string{"for", "f3"}},                                                       // 10
		node{parent: 10, name: "#text", value: "Passport number"},                                                          // 11
		node{parent: 2, name: "INPUT", attrs: []string{"id", "f3"}, bounds: []float64{0, 70, 100, 20}},                     // 12: not a secret label
		node{parent: 2, name: "LABEL", attrs: []string{"for", "f4"}},                                                       // 13
		node{parent: 13, name: "#text", value: "PIN"},                                                                      // 14
		node{parent: 2, name: "INPUT", attrs: []string{"id", "f4", "type", "checkbox"}, bounds: []float64{0, 100, 10, 10}}, // 15: no text
	)
	sec, err := findSecrets(s.json(t), NewRules(nil, nil, false))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]Rect{{{0, 10, 100, 20}}, {{0, 40, 100, 20}}}
	if !slices.EqualFunc(sec.Regions, want, slices.Equal) {
		t.Fatalf("regions %v, want %v", sec.Regions, want)
	}
}

func TestFindSecrets(t *testing.T) {
	s := &snap{}
	s.doc(
		node{parent: -1, name: "#document", bounds: []float64{0, 0, 1280, 800}},                                // 0
		node{parent: 0, name: "HTML"},                                                                          // 1
		node{parent: 1, name: "BODY", bounds: []float64{0, 0, 1265, 3000}},                                     // 2
		node{parent: 2, name: "DIV", attrs: []string{"data-private", "\x00"}},                                  // 3: display:contents
		node{parent: 3, name: "#text", bounds: []float64{10, 10, 50, 20}},                                      // 4
		node{parent: 3, name: "SPAN", bounds: []float64{10, 40, 80, 20}},                                       // 5
		node{parent: 5, name: "B", attrs: []string{"class", "rr-block"}, bounds: []float64{12, 42, 10, 10}},    // 6: inside 3's region
		node{parent: 2, name: "INPUT", attrs: []string{"type", "password"}},                                    // 7: display:none
		node{parent: 2, name: "IFRAME", bounds: []float64{300, 400, 400, 100}, child: 1},                       // 8
		node{parent: 2, name: "P", bounds: []float64{0, 600, 100, 20}},                                         // 9
		node{parent: 2, name: "IFRAME", bounds: []float64{300, 700, 400, 100}, child: 2},                       // 10: nothing secret inside
		node{parent: 2, name: "INPUT", attrs: []string{"type", "password"}, bounds: []float64{0, 900, 100, 0}}, // 11: empty box
	)
	s.doc( // the first iframe's document: a password field in its own coordinates
		node{parent: -1, name: "#document", bounds: []float64{0, 0, 400, 100}},
		node{parent: 0, name: "INPUT", attrs: []string{"type", "password"}, bounds: []float64{8, 8, 100, 20}},
	)
	s.doc(
		node{parent: -1, name: "#document", bounds: []float64{0, 0, 400, 100}},
		node{parent: 0, name: "P", bounds: []float64{8, 8, 100, 20}},
	)
	sec, err := findSecrets(s.json(t), NewRules(nil, nil, false))
	if err != nil {
		t.Fatal(err)
	}
	want := [][]Rect{
		{{10, 10, 50, 20}, {10, 40, 80, 20}, {12, 42, 10, 10}},
		{{300, 400, 400, 100}},
	}
	if !slices.EqualFunc(sec.Regions, want, slices.Equal) {
		t.Fatalf("regions %v, want %v", sec.Regions, want)
	}
	if sec.ScrollY != 100 || sec.height != 3000 {
		t.Fatalf("scroll %v, content height %v", sec.ScrollY, sec.height)
	}
	if !sec.equal(sec) {
		t.Fatal("secrets differ from themselves")
	}
	moved := sec
	moved.Regions = [][]Rect{want[0], {{300, 401, 400, 100}}}
	scrolled := sec
	scrolled.ScrollY = 101
	if sec.equal(moved) || sec.equal(scrolled) {
		t.Fatal("a moved secret or a scrolled page reads as the same")
	}
}

// TestFindSecretsRefuses feeds snapshots the broker cannot make sense of: each fails,
// none is read as a page without secrets.
func TestFindSecretsRefuses(t *testing.T) {
	rules := NewRules(nil, nil, false)
	edit := func(f func(d map[string]any, s *snap)) []byte {
		s := oneElement("DIV")
		f(s.docs[0], s)
		return s.json(t)
	}
	nodes := func(d map[string]any) map[string]any { return d["nodes"].(map[string]any) }
	for name, raw := range map[string][]byte{
		"not json":     []byte(`{"documents":[`),
		"no document":  []byte(`{"documents":[],"strings":[]}`),
		"parent after": edit(func(d map[string]any, _ *snap) { nodes(d)["parentIndex"] = []int{-1, 2, 1, 2} }),
		"two roots":    edit(func(d map[string]any, _ *snap) { nodes(d)["parentIndex"] = []int{-1, -1, 1, 2} }),
		"name unknown": edit(func(d map[string]any, _ *snap) { nodes(d)["nodeName"] = []int{0, 1, 2, 99} }),
		"attr unknown": edit(func(d map[string]any, _ *snap) { nodes(d)["attributes"] = [][]int{{}, {}, {}, {99, -1}} }),
		"attr odd":     edit(func(d map[string]any, s *snap) { nodes(d)["attributes"] = [][]int{{}, {}, {}, {s.str("id")}} }),
		"short names":  edit(func(d map[string]any, _ *snap) { nodes(d)["nodeName"] = []int{0, 1} }),
		"layout unknown": edit(func(d map[string]any, _ *snap) {
			d["layout"] = map[string]any{"nodeIndex": []int{9}, "bounds": [][]float64{{0, 0, 1, 1}}}
		}),
		"layout short": edit(func(d map[string]any, _ *snap) {
			d["layout"] = map[string]any{"nodeIndex": []int{3}, "bounds": [][]float64{}}
		}),
		"orphan document": func() []byte { s := oneElement("DIV"); s.doc(node{parent: -1, name: "#document"}); return s.json(t) }(),
		"own child": edit(func(d map[string]any, _ *snap) {
			nodes(d)["contentDocumentIndex"] = map[string][]int{"index": {3}, "value": {0}}
		}),
	} {
		if _, err := findSecrets(raw, rules); !errors.Is(err, errSnapshot) {
			t.Errorf("%s: %v, want errSnapshot", name, err)
		}
	}
	bad := oneElement("DIV", "data-private", "\x00")
	bad.docs[0]["layout"] = map[string]any{"nodeIndex": []int{3}, "bounds": [][]float64{{1, 2, 3}}}
	if _, err := findSecrets(bad.json(t), rules); !errors.Is(err, errSnapshot) {
		t.Errorf("a secret's bounds of 3 numbers: %v, want errSnapshot", err)
	}
}

func TestMaskBoxes(t *testing.T) {
	clip := Rect{X: 0, Y: 100, W: 1280, H: 800}
	sec := Secrets{Regions: [][]Rect{
		{{10, 110, 100, 20}},                       // in view
		{{0, 0, 50, 50}},                           // above the viewport
		{{1270, 880, 100, 100}, {0, 1000, 10, 10}}, // over the bottom right corner; the rest below
		{{10.2, 150.6, 0.5, 0.5}},                  // a fraction of a pixel
	}}
	boxes, shown := sec.Boxes(clip, 640, 400)
	want := []image.Rectangle{
		image.Rect(3, 3, 57, 17),
		image.Rect(633, 388, 640, 400),
		image.Rect(3, 23, 8, 28),
	}
	if !slices.Equal(boxes, want) || shown != 3 {
		t.Fatalf("boxes %v shown %d, want %v and 3", boxes, shown, want)
	}
	if boxes, shown := sec.Boxes(Rect{}, 640, 400); boxes != nil || shown != 0 {
		t.Fatalf("an empty clip placed %v", boxes)
	}
}

// TestSpanSecrets: two reads around a screenshot that disagree are masked where each
// secret was in either and on its way between, or cannot be related (masked whole).
func TestSpanSecrets(t *testing.T) {
	frameA := Frame{Backend: 9, rects: []Rect{{0, 400, 300, 150}}}
	frameB := Frame{Backend: 9, rects: []Rect{{0, 500, 300, 150}}}
	base := Secrets{
		Regions: [][]Rect{{{40, 120, 420, 50}}, {{600, 0, 10, 10}, {600, 20, 10, 10}}, {{5, 405, 20, 20}}},
		Roots:   []int{3, 4, 9},
		placed:  []placedFrame{{from: 2, to: 3, frame: frameA}},
	}
	with := func(edit func(*Secrets)) Secrets {
		s := base
		s.Regions = slices.Clone(base.Regions)
		s.Roots = slices.Clone(base.Roots)
		s.placed = slices.Clone(base.placed)
		edit(&s)
		return s
	}
	tests := []struct {
		name   string
		b      Secrets
		want   [][]Rect
		wantOK bool
		whole  bool
		frame  []Rect // the placed frame's rects, for masking it whole
	}{
		{name: "the same reads", b: base, want: base.Regions, wantOK: true, frame: frameA.rects},
		{
			name: "a secret moved down",
			b:    with(func(s *Secrets) { s.Regions[0] = []Rect{{40, 320, 420, 50}} }),
			want: [][]Rect{{{40, 120, 420, 250}}, base.Regions[1], base.Regions[2]}, wantOK: true, frame: frameA.rects,
		},
		{
			name: "a secret moved up and left, a frame moved",
			b: with(func(s *Secrets) {
				s.Regions[1] = []Rect{{500, -30, 10, 10}, {600, 20, 10, 10}}
				s.Regions[2] = []Rect{{5, 505, 20, 20}}
				s.placed = []placedFrame{{from: 2, to: 3, frame: frameB}}
			}),
			want:   [][]Rect{base.Regions[0], {{500, -30, 110, 40}, {600, 20, 10, 10}}, {{5, 405, 20, 120}}},
			wantOK: true, frame: []Rect{{0, 400, 300, 250}},
		},
		{
			name:   "a secret drew one more box",
			b:      with(func(s *Secrets) { s.Regions[1] = append(s.Regions[1], Rect{700, 700, 5, 5}) }),
			want:   [][]Rect{base.Regions[0], {{600, 0, 105, 705}}, base.Regions[2]},
			wantOK: true, frame: frameA.rects,
		},
		{
			name:   "whole in one read",
			b:      with(func(s *Secrets) { s.Whole = true; s.Regions[0] = []Rect{{40, 121, 420, 50}} }),
			want:   [][]Rect{{{40, 120, 420, 51}}, base.Regions[1], base.Regions[2]},
			wantOK: true, whole: true, frame: frameA.rects,
		},
		{name: "a secret appeared", b: with(func(s *Secrets) { s.Regions = append(s.Regions, []Rect{{1, 1, 1, 1}}); s.Roots = append(s.Roots, 5) })},
		{name: "a secret left", b: with(func(s *Secrets) { s.Regions = s.Regions[:2]; s.Roots = s.Roots[:2]; s.placed = nil })},
		{name: "another secret in its place", b: with(func(s *Secrets) { s.Roots[0] = 7; s.Regions[0] = []Rect{{40, 121, 420, 50}} })},
		{name: "scrolled", b: with(func(s *Secrets) { s.ScrollY = 100 })},
		{name: "a frame's secrets placed otherwise", b: with(func(s *Secrets) {
			s.placed = []placedFrame{{from: 1, to: 3, frame: frameA}}
			s.Regions[2] = []Rect{{5, 505, 20, 20}}
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Span(base, tt.b)
			if ok != tt.wantOK {
				t.Fatalf("ok %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if !slices.EqualFunc(got.Regions, tt.want, slices.Equal) || got.Whole != tt.whole {
				t.Fatalf("regions %v whole %v, want %v whole %v", got.Regions, got.Whole, tt.want, tt.whole)
			}
			if len(got.placed) != 1 || !slices.Equal(got.placed[0].frame.rects, tt.frame) {
				t.Fatalf("placed %+v, want its frame at %v", got.placed, tt.frame)
			}
			// Masked whole, the frame covers where it was in either read.
			got.MaskPlacedWhole(0)
			if !slices.Equal(got.Regions[2], tt.frame) {
				t.Fatalf("the frame masked whole at %v, want %v", got.Regions[2], tt.frame)
			}
		})
	}
	if !slices.Equal(base.placed[0].frame.rects, frameA.rects) {
		t.Fatal("Span changed its argument")
	}
}

// TestCheckName: a deployment's extra attribute or class is a name, not a selector;
// the broker's Config checks its lists with it (TestConfigMaskNames).
func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{
		"data-secret": true, "pii": true, "x:y_z.1": true,
		"": false, "a b": false, `a"`: false, "a=b": false, "a>b": false, "ж": false,
		string(make([]byte, MaxNameBytes+1)): false,
	} {
		if err := CheckName(name); (err == nil) != ok {
			t.Errorf("CheckName(%q) = %v", name, err)
		}
	}
}

// TestParseMaskSwitch: on and off only, as AGENTFY_MASK and agentfy-dev dev -mask take it.
func TestParseMaskSwitch(t *testing.T) {
	for _, tt := range []struct {
		v       string
		noMask  bool
		wantErr bool
	}{{"on", false, false}, {"off", true, false}, {"", false, true}, {"OFF", false, true}, {"no", false, true}} {
		noMask, err := ParseSwitch(tt.v)
		if noMask != tt.noMask || (err != nil) != tt.wantErr {
			t.Errorf("ParseSwitch(%q) = %v, %v; want %v, error %v", tt.v, noMask, err, tt.noMask, tt.wantErr)
		}
	}
}
