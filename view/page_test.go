package view_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentfy/agentfy/internal/test/oas"
	"github.com/agentfy/agentfy/openapi"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

func TestResultJSON(t *testing.T) {
	page := &wire.Page{URL: `https://example.com/a?q="x"&y=<z>`, Title: "Счёт — \u2028 \"quoted\"", CapturedAt: "2026-11-30T12:00:00.000Z", ContentType: "image/jpeg", Data: "/9j/2Q=="}
	tests := []struct {
		name string
		res  view.Result
		want string
	}{
		{"not live", view.Result{}, `{"live":false}`},
		{"not live ignores a page", view.Result{Page: page}, `{"live":false}`},
		{"no tab", view.Result{Live: true}, `{"live":true,"page":null}`},
		{"frame", view.Result{Live: true, Page: &wire.Page{URL: "https://example.com/", Title: "Example", CapturedAt: "2026-11-30T12:00:00.000Z", ContentType: "image/jpeg", Data: "/9j/2Q=="}},
			`{"live":true,"page":{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q=="}}`},
		{"masked frame", view.Result{Live: true, Page: &wire.Page{URL: "https://example.com/", Title: "Example", CapturedAt: "2026-11-30T12:00:00.000Z", ContentType: "image/jpeg", Data: "/9j/2Q==", Masked: 2}},
			`{"live":true,"page":{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q==","masked":2}}`},
		{"most masked", view.Result{Live: true, Page: &wire.Page{URL: "", Title: "", CapturedAt: "", ContentType: "", Data: "", Masked: wire.MaxMasked}},
			`{"live":true,"page":{"url":"","title":"","capturedAt":"","contentType":"","data":"","masked":10000}}`},
		{"hidden frame", view.Result{Live: true, Page: &wire.Page{URL: "https://example.com/", Title: "Example", CapturedAt: "2026-11-30T12:00:00.000Z", ContentType: "image/jpeg", Data: "/9j/2Q==", Masked: 1, Hidden: wire.HiddenMotion}},
			`{"live":true,"page":{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q==","masked":1,"hidden":"motion"}}`},
		{"most masked, hidden", view.Result{Live: true, Page: &wire.Page{Masked: wire.MaxMasked, Hidden: wire.HiddenViewTransition}},
			`{"live":true,"page":{"url":"","title":"","capturedAt":"","contentType":"","data":"","masked":10000,"hidden":"view_transition"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.res.MarshalJSON()
			if err != nil || string(b) != tt.want {
				t.Fatalf("got %s, %v; want %s", b, err, tt.want)
			}
			// The route writes the same bytes and a newline, in one write.
			var w countingWriter
			if err := tt.res.WriteJSON(&w); err != nil || w.String() != tt.want+"\n" || w.writes != 1 {
				t.Fatalf("WriteJSON wrote %q in %d writes, %v; want %q", w.String(), w.writes, err, tt.want+"\n")
			}
		})
	}
	// Both ways of writing a page (base64 data in one pass, anything else through
	// json.Marshal) write what json.Marshal would, masked count and hidden reason
	// included.
	for name, data := range map[string]string{"base64 data": page.Data, "data needing escapes": "a\"b\\c"} {
		for _, m := range []struct {
			masked int
			hidden string
		}{{0, ""}, {3, ""}, {3, wire.HiddenInk}} {
			t.Run(fmt.Sprintf("%s, masked %d, hidden %q", name, m.masked, m.hidden), func(t *testing.T) {
				p := *page
				p.Data, p.Masked, p.Hidden = data, m.masked, m.hidden
				b, err := view.Result{Live: true, Page: &p}.MarshalJSON()
				if err != nil || !json.Valid(b) {
					t.Fatalf("invalid JSON %s: %v", b, err)
				}
				want, err := json.Marshal(struct {
					Live bool       `json:"live"`
					Page *wire.Page `json:"page"`
				}{true, &p})
				if err != nil || string(b) != string(want) {
					t.Fatalf("wrote\n%s\njson.Marshal writes\n%s", b, want)
				}
				var back struct {
					Live bool       `json:"live"`
					Page *wire.Page `json:"page"`
				}
				if err := json.Unmarshal(b, &back); err != nil || !back.Live || !reflect.DeepEqual(*back.Page, p) {
					t.Fatalf("round trip: %+v %v", back.Page, err)
				}
			})
		}
	}
}

// TestResultConformsToDocument: every shape Result writes is a 200 body the OpenAPI
// document allows, masked count and hidden reason included, and the document refuses a
// count or a reason the API never writes.
func TestResultConformsToDocument(t *testing.T) {
	ctx := t.Context()
	v, err := oas.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page := func(masked int) *wire.Page {
		return &wire.Page{URL: "https://example.com/", Title: "Example", CapturedAt: "2026-11-30T12:00:00.000Z", ContentType: wire.ContentTypeJPEG, Data: "/9j/2Q==", Masked: masked}
	}
	hidden := func(masked int, reason string) *wire.Page {
		p := page(masked)
		p.Hidden = reason
		return p
	}
	body := func(r view.Result) string {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	frame := body(view.Result{Live: true, Page: page(0)})
	type test struct {
		name    string
		body    string
		wantErr bool
	}
	tests := []test{
		{name: "closed", body: body(view.Result{})},
		{name: "no tab", body: body(view.Result{Live: true})},
		{name: "frame", body: frame},
		{name: "masked frame", body: body(view.Result{Live: true, Page: page(2)})},
		{name: "most masked", body: body(view.Result{Live: true, Page: page(wire.MaxMasked)})},
		{name: "masked 0", body: strings.Replace(frame, `"}}`, `","masked":0}}`, 1), wantErr: true},
		{name: "masked beyond the bound", body: body(view.Result{Live: true, Page: page(wire.MaxMasked + 1)}), wantErr: true},
		{name: "masked as a string", body: strings.Replace(frame, `"}}`, `","masked":"2"}}`, 1), wantErr: true},
		{name: "hidden, most masked", body: body(view.Result{Live: true, Page: hidden(wire.MaxMasked, wire.HiddenChanged)})},
		{name: "hidden without masked", body: body(view.Result{Live: true, Page: hidden(0, wire.HiddenMotion)}), wantErr: true},
		{name: "hidden, an unknown reason", body: body(view.Result{Live: true, Page: hidden(1, "blur")}), wantErr: true},
		{name: "hidden null", body: strings.Replace(frame, `"}}`, `","masked":1,"hidden":null}}`, 1), wantErr: true},
		{name: "hidden as a number", body: strings.Replace(frame, `"}}`, `","masked":1,"hidden":1}}`, 1), wantErr: true},
	}
	for _, reason := range wire.HiddenReasons {
		tests = append(tests, test{name: "hidden " + reason, body: body(view.Result{Live: true, Page: hidden(1, reason)})})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/v1/orgs/org-acme/agents/agent-scout/worker/view", nil)
			header := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}}
			if err := v.Validate(ctx, req, http.StatusOK, header, []byte(tt.body)); (err != nil) != tt.wantErr {
				t.Fatalf("Validate(%s) = %v, want an error: %v", tt.body, err, tt.wantErr)
			}
		})
	}
}

// countingWriter is a bytes.Buffer that counts the writes it took.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func (w *countingWriter) WriteString(s string) (int, error) {
	w.writes++
	return w.Buffer.WriteString(s)
}

// TestDocumentHiddenReasons: the OpenAPI document's reasons for a frame hidden whole are
// wire's, in the same order (the SDK's type and the web app's words follow them), and
// it names masked as hidden's companion.
func TestDocumentHiddenReasons(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.Document)
	if err != nil {
		t.Fatal(err)
	}
	page := doc.Components.Schemas["WorkerPage"].Value
	var reasons []string
	for _, v := range page.Properties["hidden"].Value.Enum {
		s, _ := v.(string)
		reasons = append(reasons, s)
	}
	if !slices.Equal(reasons, wire.HiddenReasons) {
		t.Errorf("the document's hidden reasons are %q, wire's %q", reasons, wire.HiddenReasons)
	}
	if got := page.DependentRequired["hidden"]; !slices.Equal(got, []string{"masked"}) {
		t.Errorf("hidden depends on %q, want masked", got)
	}
}
