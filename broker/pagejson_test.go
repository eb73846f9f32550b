package broker

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// pageJSON with the capture's base64 writes the bytes json.Marshal writes for the page,
// whatever its strings hold.
func TestPageJSONIsTheMarshalledPage(t *testing.T) {
	frame := []byte{0xff, 0xd8, 0xff, 0xe0, 0, 1, 2, 3, 0xfe, 0xff, 0xd9}
	for _, title := range []string{"", "Home", `<b>"quoted" & \ </b>`, "Счёт — \u2028 \x01", "\xff invalid"} {
		p := &Page{URL: "https://example.com/?a=1&b=<2>", Title: title, CapturedAt: "2026-11-30T21:00:00.000Z", ContentType: CaptureContentType, Data: frame}
		want, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		p.text = []byte(base64.StdEncoding.EncodeToString(frame))
		got, err := pageJSON(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("title %q: pageJSON wrote\n%s (%v)\njson.Marshal writes\n%s", title, got, err, want)
		}
		p.text = nil
		if got, err := pageJSON(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("title %q without text: %s (%v)", title, got, err)
		}
	}
}

// screenshotData keeps the base64 text only when it is the canonical encoding of the
// JPEG it decodes to; any other shape goes to encoding/json, which decides.
func TestScreenshotData(t *testing.T) {
	frame := []byte{0xff, 0xd8, 0xff, 0xe0, 9, 8, 7, 6, 5, 0xff, 0xd9} // 11 bytes: one '='
	text := base64.StdEncoding.EncodeToString(frame)
	// The same bytes with a padding bit set: the lenient decoder takes it, Strict does not.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	last := strings.IndexByte(alphabet, text[len(text)-2])
	loose := text[:len(text)-2] + string(alphabet[last^1]) + "="
	for _, tc := range []struct {
		name, raw string
		keepText  bool
		fails     bool
	}{
		{"as Chromium writes it", `{"data":"` + text + `"}`, true, false},
		{"with spaces", " { \"data\" : \"" + text + "\" } ", true, false},
		{"escaped slash", `{"data":"` + text[:4] + `\/` + text[5:] + `"}`, false, true}, // text[4] is not '/': a different, invalid text
		{"another member", `{"data":"` + text + `","x":1}`, false, false},
		{"non-canonical padding bits", `{"data":"` + loose + `"}`, false, false},
		{"not base64", `{"data":"**"}`, false, true},
		{"not an object", `"` + text + `"`, false, true},
		{"trailing garbage", `{"data":"` + text + `"}x`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, gotText, err := screenshotData([]byte(tc.raw))
			if tc.fails {
				if err == nil && bytes.Equal(data, frame) {
					t.Fatalf("accepted %s as the frame", tc.raw)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.raw, err)
			}
			if (gotText != nil) != tc.keepText {
				t.Fatalf("text kept %v, want %v", gotText != nil, tc.keepText)
			}
			if gotText != nil && (string(gotText) != base64.StdEncoding.EncodeToString(data) || !bytes.Equal(data, frame)) {
				t.Fatalf("text %s for data %x", gotText, data)
			}
		})
	}
}
