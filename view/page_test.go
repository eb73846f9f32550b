package view_test

import (
	"encoding/json"
	"reflect"
	"testing"

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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.res.MarshalJSON()
			if err != nil || string(b) != tt.want {
				t.Fatalf("got %s, %v; want %s", b, err, tt.want)
			}
		})
	}
	for name, data := range map[string]string{"base64 data": page.Data, "data needing escapes": "a\"b\\c"} {
		t.Run(name, func(t *testing.T) {
			p := *page
			p.Data = data
			b, err := view.Result{Live: true, Page: &p}.MarshalJSON()
			if err != nil || !json.Valid(b) {
				t.Fatalf("invalid JSON %s: %v", b, err)
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
