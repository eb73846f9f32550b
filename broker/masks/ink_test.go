package masks

import (
	"image"
	"slices"
	"testing"
)

// page is a snapshot of a top document whose body holds nodes (their parents counted
// from the body, 2; the document is 0, html 1).
func page(nodes ...node) *snap {
	s := &snap{}
	s.doc(append([]node{
		{parent: -1, name: "#document", bounds: []float64{0, 0, 1280, 800}},
		{parent: 0, name: "HTML"},
		{parent: 1, name: "BODY", bounds: []float64{0, 0, 1265, 3000}},
	}, nodes...)...)
	return s
}

func regionsOf(t *testing.T, s *snap, rules Rules) Secrets {
	t.Helper()
	sec, err := findSecrets(s.json(t), rules)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// TestMaskInk: a secret's mask covers what Chromium paints beyond its box — its text
// and box shadows, its ancestors' drop shadows and blurs, scaled by their transforms,
// and the reflections that copy it; ink that cannot be placed (an SVG filter anywhere
// in a page with a secret, an unreadable value) masks the frame whole.
func TestMaskInk(t *testing.T) {
	pw := []string{"type", "password"}
	box := []float64{100, 100, 200, 40}
	tests := []struct {
		name  string
		nodes []node
		want  [][]Rect
		whole bool
	}{
		{"text shadow 80 px below", []node{
			{parent: 2, name: "INPUT", attrs: pw, bounds: box, style: map[string]string{"text-shadow": "rgb(0, 200, 0) 0px 80px 0px"}},
		}, [][]Rect{{{100, 100, 200, 120}}}, false},
		{"blurred shadows left and up, an inset box shadow", []node{
			{parent: 2, name: "INPUT", attrs: pw, bounds: box, style: map[string]string{
				"text-shadow": "red -10px 0px 4px, blue 0px -5px 0px", "box-shadow": "rgb(0, 0, 0) 0px 0px 0px 3px inset"}},
		}, [][]Rect{{{84, 94, 216, 52}}}, false},
		{"an ancestor's drop shadow and blur", []node{
			{parent: 2, name: "DIV", bounds: []float64{0, 90, 1265, 60}, style: map[string]string{"filter": "drop-shadow(rgb(255, 0, 0) 0px 80px 0px) blur(2px) grayscale(1)"}},
			{parent: 3, name: "INPUT", attrs: pw, bounds: box},
		}, [][]Rect{{{94, 94, 212, 132}}}, false},
		{"a shadow in a scaled ancestor", []node{
			{parent: 2, name: "DIV", bounds: []float64{0, 0, 1265, 600}, style: map[string]string{"transform": "matrix(3, 0, 0, 3, 0, 0)"}},
			{parent: 3, name: "INPUT", attrs: pw, bounds: box, style: map[string]string{"text-shadow": "red 0px 10px 0px", "transform": "matrix(3, 0, 0, 3, 0, 0)"}},
		}, [][]Rect{{{100, 100, 200, 130}}}, false},
		{"a reflection of the secret", []node{
			{parent: 2, name: "SPAN", attrs: []string{"class", "rr-block"}, bounds: box, style: map[string]string{"-webkit-box-reflect": "below 10px none"}},
		}, [][]Rect{{{100, 100, 200, 40}, {100, 150, 200, 40}}}, false},
		{"a reflection of its ancestor", []node{
			{parent: 2, name: "DIV", bounds: []float64{0, 90, 1265, 60}, style: map[string]string{"-webkit-box-reflect": "right 0px none"}},
			{parent: 3, name: "INPUT", attrs: pw, bounds: box},
		}, [][]Rect{{{100, 100, 200, 40}, {1265, 90, 1265, 60}}}, false},
		{"an SVG filter on the secret", []node{
			{parent: 2, name: "INPUT", attrs: pw, bounds: box, style: map[string]string{"filter": `url("#f")`}},
		}, [][]Rect{{{100, 100, 200, 40}}}, true},
		{"an SVG filter elsewhere on a page with a secret", []node{
			{parent: 2, name: "INPUT", attrs: pw, bounds: box},
			{parent: 2, name: "DIV", bounds: []float64{0, 500, 100, 100}, style: map[string]string{"filter": `url("#feimage")`}},
		}, [][]Rect{{{100, 100, 200, 40}}}, true},
		{"a perspective", []node{
			{parent: 2, name: "DIV", bounds: []float64{0, 0, 1265, 600}, style: map[string]string{"transform": "matrix3d(1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, -0.002, 0, 0, 0, 1)"}},
			{parent: 3, name: "INPUT", attrs: pw, bounds: box},
		}, [][]Rect{{{100, 100, 200, 40}}}, true},
		{"a shadow a screen away", []node{
			{parent: 2, name: "INPUT", attrs: pw, bounds: box, style: map[string]string{"text-shadow": "red 0px 9000px 0px"}},
		}, [][]Rect{{{100, 100, 200, 9040}}}, true},
		{"ink of a control is no secret's", []node{
			{parent: 2, name: "INPUT", attrs: pw, bounds: box},
			{parent: 2, name: "INPUT", bounds: []float64{100, 300, 200, 40}, style: map[string]string{"text-shadow": "red 0px 80px 0px", "filter": "blur(4px)"}},
		}, [][]Rect{{{100, 100, 200, 40}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec := regionsOf(t, page(tt.nodes...), NewRules(nil, nil, false))
			if !slices.EqualFunc(sec.Regions, tt.want, slices.Equal) || sec.Whole != tt.whole {
				t.Fatalf("regions %v whole %t, want %v whole %t", sec.Regions, sec.Whole, tt.want, tt.whole)
			}
		})
	}
	whole := Secrets{Whole: true, Regions: [][]Rect{{{0, 0, 1, 1}}, {{5, 5, 1, 1}}}}
	if boxes, shown := whole.Boxes(Rect{W: 1280, H: 800}, 640, 400); !slices.Equal(boxes, []image.Rectangle{image.Rect(0, 0, 640, 400)}) || shown != 2 {
		t.Fatalf("masked whole: %v, %d shown", boxes, shown)
	}
}

// TestMaskSVGUse: a <use> that draws a secret element, or one holding a secret, is
// masked where it draws; a <use> of anything else, or of another document, is not.
func TestMaskSVGUse(t *testing.T) {
	sec := regionsOf(t, page(
		node{parent: 2, name: "svg", bounds: []float64{0, 0, 600, 400}}, // 3
		node{parent: 3, name: "defs"},                                   // 4
		node{parent: 4, name: "text", attrs: []string{"id", "t", "class", "rr-block"}, bounds: []float64{0, 0, 50, 20}}, // 5
		node{parent: 4, name: "g", attrs: []string{"id", "g"}},                                                          // 6
		node{parent: 6, name: "text", attrs: []string{"data-private", ""}},                                              // 7
		node{parent: 4, name: "text", attrs: []string{"id", "plain"}},                                                   // 8
		node{parent: 3, name: "use", attrs: []string{"href", "#t"}, bounds: []float64{100, 100, 50, 20}},                // 9
		node{parent: 3, name: "use", attrs: []string{"xlink:href", "#g"}, bounds: []float64{200, 100, 50, 20}},          // 10
		node{parent: 3, name: "use", attrs: []string{"id", "u", "href", "#plain"}, bounds: []float64{300, 100, 50, 20}}, // 11
		node{parent: 3, name: "use", attrs: []string{"href", "other.svg#t"}, bounds: []float64{400, 100, 50, 20}},       // 12
		node{parent: 3, name: "use", attrs: []string{"href", "#v"}, bounds: []float64{500, 100, 50, 20}},                // 13: a use of a use of a secret
		node{parent: 3, name: "use", attrs: []string{"id", "v", "href", "#t"}, bounds: []float64{500, 200, 50, 20}},     // 14
	), NewRules(nil, nil, false))
	want := [][]Rect{{{0, 0, 50, 20}}, {{100, 100, 50, 20}}, {{200, 100, 50, 20}}, {{500, 200, 50, 20}}, {{500, 100, 50, 20}}}
	if !slices.EqualFunc(sec.Regions, want, slices.Equal) {
		t.Fatalf("regions %v, want %v", sec.Regions, want)
	}
}

// TestOpaqueFrames: a frame the snapshot holds no document of (out of process,
// sandboxed, an embed) is masked whole unless the deployment shows them; one whose
// document the snapshot reads is masked only for a secret inside.
func TestOpaqueFrames(t *testing.T) {
	s := page(
		node{parent: 2, name: "IFRAME", attrs: []string{"sandbox", ""}, bounds: []float64{0, 0, 300, 150}}, // 3: no document
		node{parent: 2, name: "IFRAME", bounds: []float64{0, 200, 300, 150}, child: 1},                     // 4: read, nothing secret
		node{parent: 2, name: "EMBED", bounds: []float64{0, 400, 300, 150}},                                // 5
		node{parent: 2, name: "DIV", bounds: []float64{0, 600, 300, 150}},                                  // 6
	)
	s.doc(node{parent: -1, name: "#document", bounds: []float64{0, 0, 300, 150}}, node{parent: 0, name: "P", bounds: []float64{8, 8, 100, 20}})
	sec := regionsOf(t, s, NewRules(nil, nil, false))
	want := [][]Rect{{{0, 0, 300, 150}}, {{0, 400, 300, 150}}}
	if !slices.EqualFunc(sec.Regions, want, slices.Equal) {
		t.Fatalf("regions %v, want %v", sec.Regions, want)
	}
	shown := NewRules(nil, nil, true)
	if sec := regionsOf(t, s, shown); len(sec.Regions) != 0 {
		t.Fatalf("with opaque frames shown: regions %v", sec.Regions)
	}
}

// TestInkParsers reads computed values as Chromium writes them, and refuses what they
// cannot place.
func TestInkParsers(t *testing.T) {
	for v, want := range map[string]outset{
		"none":                                {},
		"rgb(0, 200, 0) 0px 80px 0px":         {0, 0, 0, 80},
		"rgba(0, 0, 0, 0.5) 2px 3px 4px":      {4, 3, 8, 9},
		"red 1px 1px 0px, blue -1px -1px 0px": {1, 1, 1, 1},
	} {
		if got, ok := shadowOutset(v, false); !ok || got != want {
			t.Errorf("text-shadow %q: %v %t, want %v", v, got, ok, want)
		}
	}
	if got, ok := shadowOutset("rgb(0, 0, 0) 0px 0px 0px 5px", true); !ok || got != (outset{5, 5, 5, 5}) {
		t.Errorf("box-shadow spread: %v %t", got, ok)
	}
	if got, ok := shadowOutset("rgb(0, 0, 0) 0px 0px 0px 5px inset", true); !ok || got != (outset{}) {
		t.Errorf("inset box-shadow: %v %t", got, ok)
	}
	for _, bad := range []string{"red 1em 1em", "red 1px", "red 1px 1px 1px 1px 1px"} {
		if _, ok := shadowOutset(bad, false); ok {
			t.Errorf("text-shadow %q read", bad)
		}
	}
	for v, want := range map[string]outset{
		"blur(2px)":                     {6, 6, 6, 6},
		"sepia(1) hue-rotate(90deg)":    {},
		"drop-shadow(red 0px 80px 0px)": {0, 0, 0, 80},
	} {
		if got, ok := filterOutset(v); !ok || got != want {
			t.Errorf("filter %q: %v %t, want %v", v, got, ok, want)
		}
	}
	for _, bad := range []string{`url("#f")`, "blur(1em)", "unknown(1)", "blur"} {
		if _, ok := filterOutset(bad); ok {
			t.Errorf("filter %q read", bad)
		}
	}
	if r, ok := parseReflect("above 4px linear-gradient(transparent, white)"); !ok || r == nil || r.side != "above" || r.offset != 4 {
		t.Errorf("reflect: %+v %t", r, ok)
	}
	if _, ok := parseReflect("sideways 4px"); ok {
		t.Error("a reflection to no side read")
	}
	for _, c := range []struct {
		transform, scale, zoom string
		k                      float64
		ok                     bool
	}{
		{"none", "none", "1", 1, true},
		{"matrix(0, 2, -2, 0, 5, 5)", "none", "1", 2, true},
		{"matrix(0.5, 0, 0, 0.5, 0, 0)", "none", "1", 1, true}, // smaller is never less than the box
		{"none", "3 1", "2", 6, true},
		{"none", "150%", "1", 1.5, true},
		{"matrix3d(2, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1)", "none", "1", 2, true},
		{"matrix3d(1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, -0.002, 0, 0, 0, 1)", "none", "1", 0, false},
		{"rotate(1turn)", "none", "1", 0, false},
	} {
		if k, ok := scaleOf(c.transform, c.scale, c.zoom); k != c.k || ok != c.ok {
			t.Errorf("scaleOf(%q, %q, %q) = %v %t, want %v %t", c.transform, c.scale, c.zoom, k, ok, c.k, c.ok)
		}
	}
}
