package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestDecodePage: the page's one decoder (DecodeStrict, masked by maskedCount, hidden by
// hiddenReason) takes the broker's shapes, spaced out or reordered, and refuses every
// near miss — a member unknown, repeated or differently cased, invalid UTF-8, trailing
// data, a masked count that is not a plain JSON integer, and a hidden reason that is not
// a JSON string with something in it. ParsePage then checks the values.
func TestDecodePage(t *testing.T) {
	const five = `"url":"a","title":"x","capturedAt":"","contentType":"","data":""`
	tests := []struct {
		name    string
		page    string
		want    int    // masked
		hidden  string // hidden
		wantErr bool
	}{
		{name: "broker's shape", page: `{"url":"https://example.com/","title":"Example","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q=="}`},
		{name: "spaced and reordered", page: ` { "data" : "/9j/2Q==" , "contentType":"image/jpeg","capturedAt":"2026-11-30T12:00:00.000Z","title":"Ünïcode — ok","url":""}` + "\n"},
		{name: "escaped", page: `{"url":"a\/b","title":"x","capturedAt":"","contentType":"","data":""}`},
		{name: "masked", page: `{` + five + `,"masked":3}`, want: 3},
		{name: "masked, spaced", page: "\t{ \"url\" : \"\" , \"title\":\"Ünïcode\",\"capturedAt\":\"\",\"contentType\":\"\",\"data\":\"\"\n, \"masked\" :\r10000 }\n", want: 10000},
		{name: "masked first", page: `{"masked":3,` + five + `}`, want: 3},
		{name: "masked zero", page: `{` + five + `,"masked":0}`},
		{name: "masked minus zero", page: `{` + five + `,"masked":-0}`},
		{name: "masked negative", page: `{` + five + `,"masked":-1}`, want: -1}, // ParsePage refuses it
		{name: "masked six digits", page: `{` + five + `,"masked":100000}`, want: 100000},
		{name: "no data", page: `{"url":"a","title":"x","capturedAt":"","contentType":"","masked":3}`, want: 3}, // ParsePage: no frame
		{name: "masked leading zero", page: `{` + five + `,"masked":01}`, wantErr: true},
		{name: "masked plus sign", page: `{` + five + `,"masked":+1}`, wantErr: true},
		{name: "masked fraction", page: `{` + five + `,"masked":1.5}`, wantErr: true},
		{name: "masked integral fraction", page: `{` + five + `,"masked":2.0}`, wantErr: true},
		{name: "masked exponent", page: `{` + five + `,"masked":1e2}`, wantErr: true},
		{name: "masked overflow", page: `{` + five + `,"masked":99999999999999999999}`, wantErr: true},
		{name: "masked string", page: `{` + five + `,"masked":"3"}`, wantErr: true},
		{name: "masked null", page: `{` + five + `,"masked":null}`, wantErr: true},
		{name: "masked twice", page: `{` + five + `,"masked":3,"masked":4}`, wantErr: true},
		{name: "masked differently cased", page: `{` + five + `,"Masked":3}`, wantErr: true},
		{name: "hidden", page: `{` + five + `,"masked":1,"hidden":"motion"}`, want: 1, hidden: "motion"},
		{name: "hidden, spaced", page: `{` + five + ` , "masked" : 2 ,` + "\n" + `"hidden" : "view_transition" }`, want: 2, hidden: "view_transition"},
		{name: "hidden first", page: `{"hidden":"ink",` + five + `,"masked":1}`, want: 1, hidden: "ink"},
		{name: "hidden escaped", page: `{` + five + `,"masked":1,"hidden":"\u0063hanged"}`, want: 1, hidden: "changed"},
		{name: "hidden unknown", page: `{` + five + `,"masked":1,"hidden":"blur"}`, want: 1, hidden: "blur"}, // ParsePage refuses it
		{name: "hidden without masked", page: `{` + five + `,"hidden":"motion"}`, hidden: "motion"},          // ParsePage refuses it
		{name: "hidden empty", page: `{` + five + `,"masked":1,"hidden":""}`, wantErr: true},
		{name: "hidden null", page: `{` + five + `,"masked":1,"hidden":null}`, wantErr: true},
		{name: "hidden number", page: `{` + five + `,"masked":1,"hidden":0}`, wantErr: true},
		{name: "hidden boolean", page: `{` + five + `,"masked":1,"hidden":false}`, wantErr: true},
		{name: "hidden array", page: `{` + five + `,"masked":1,"hidden":[]}`, wantErr: true},
		{name: "hidden object", page: `{` + five + `,"masked":1,"hidden":{}}`, wantErr: true},
		{name: "hidden twice", page: `{` + five + `,"masked":1,"hidden":"motion","hidden":"ink"}`, wantErr: true},
		{name: "hidden differently cased", page: `{` + five + `,"masked":1,"HIDDEN":"motion"}`, wantErr: true},
		{name: "hidden invalid UTF-8", page: `{` + five + ",\"masked\":1,\"hidden\":\"\xff\"}", wantErr: true},
		{name: "url twice", page: `{` + five + `,"url":"b"}`, wantErr: true},
		{name: "URL", page: `{"URL":"a","title":"x","capturedAt":"","contentType":"","data":""}`, wantErr: true},
		{name: "unknown member", page: `{` + five + `,"mask":3}`, wantErr: true},
		{name: "trailing comma", page: `{` + five + `,}`, wantErr: true},
		{name: "trailing brace", page: `{` + five + `}}`, wantErr: true},
		{name: "trailing value", page: `{` + five + `} {}`, wantErr: true},
		{name: "unterminated", page: `{` + five, wantErr: true},
		{name: "a number for a string", page: `{"url":1,"title":"x","capturedAt":"","contentType":"","data":""}`, wantErr: true},
		{name: "invalid UTF-8", page: "{\"url\":\"\xff\",\"title\":\"x\",\"capturedAt\":\"\",\"contentType\":\"\",\"data\":\"\"}", wantErr: true},
		{name: "control character", page: "{\"url\":\"\t\",\"title\":\"x\",\"capturedAt\":\"\",\"contentType\":\"\",\"data\":\"\"}", wantErr: true},
		{name: "not an object", page: `3}`, wantErr: true},
		{name: "empty", page: ``, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := decodePage([]byte(tt.page))
			if (err != nil) != tt.wantErr {
				t.Fatalf("decodePage(%q) = %+v, %v; want error %t", tt.page, p, err, tt.wantErr)
			}
			if err == nil && (p.Masked != tt.want || p.Hidden != tt.hidden) {
				t.Fatalf("masked %d, hidden %q; want %d, %q", p.Masked, p.Hidden, tt.want, tt.hidden)
			}
		})
	}
}

// BenchmarkDecodePage prices the page's decode alone, on a page of a 36 KB base64 frame:
// ParsePage's decoder, and encoding/json with the same strictness, in the same run.
func BenchmarkDecodePage(b *testing.B) {
	page := []byte(`{"url":"http://127.0.0.1:8080/","title":"Northwind Supplies — Home","capturedAt":"2026-11-30T12:00:00.000Z","contentType":"image/jpeg","data":"` +
		strings.Repeat("QUJD", 9000) + `","masked":3}`)
	b.Run("decodePage", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			if p, err := decodePage(page); err != nil || p.Masked != 3 {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(page)))
		b.ReportAllocs()
		for b.Loop() {
			dec := json.NewDecoder(bytes.NewReader(page))
			dec.DisallowUnknownFields()
			var p Page
			if err := dec.Decode(&p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
