package view_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/internal/test/oas"
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
	// json.Marshal) write what json.Marshal would, masked count included.
	for name, data := range map[string]string{"base64 data": page.Data, "data needing escapes": "a\"b\\c"} {
		for _, masked := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s, masked %d", name, masked), func(t *testing.T) {
				p := *page
				p.Data, p.Masked = data, masked
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
// document allows, masked count included, and the document refuses a count the API
// never writes.
func TestResultConformsToDocument(t *testing.T) {
	ctx := t.Context()
	v, err := oas.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page := func(masked int) *wire.Page {
		return &wire.Page{URL: "https://example.com/", Title: "Example", CapturedAt: "2026-11-30T12:00:00.000Z", ContentType: wire.ContentTypeJPEG, Data: "/9j/2Q==", Masked: masked}
	}
	body := func(r view.Result) string {
		b, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	frame := body(view.Result{Live: true, Page: page(0)})
	tests := []struct {
		name    string
		body    string
		wantErr bool
	}{
		{name: "closed", body: body(view.Result{})},
		{name: "no tab", body: body(view.Result{Live: true})},
		{name: "frame", body: frame},
		{name: "masked frame", body: body(view.Result{Live: true, Page: page(2)})},
		{name: "most masked", body: body(view.Result{Live: true, Page: page(wire.MaxMasked)})},
		{name: "masked 0", body: strings.Replace(frame, `"}}`, `","masked":0}}`, 1), wantErr: true},
		{name: "masked beyond the bound", body: body(view.Result{Live: true, Page: page(wire.MaxMasked + 1)}), wantErr: true},
		{name: "masked as a string", body: strings.Replace(frame, `"}}`, `","masked":"2"}}`, 1), wantErr: true},
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
