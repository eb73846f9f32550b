package reliability

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// mutateField returns the sealed body with one envelope field changed by f.
func mutateField(field string, f func(string) string) func([]byte) []byte {
	return func(b []byte) []byte {
		var body map[string]map[string]string
		if json.Unmarshal(b, &body) != nil || body["envelope"] == nil {
			return b
		}
		body["envelope"][field] = f(body["envelope"][field])
		out, _ := json.Marshal(body)
		return out
	}
}

// flip changes the last-but-one character to another one of the same alphabet.
func flip(s string) string {
	if len(s) < 2 {
		return s + "0"
	}
	i := len(s) - 2
	c := s[i]
	switch c {
	case 'a':
		c = 'b'
	case 'A':
		c = 'B'
	default:
		c = 'a'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestTampering(t *testing.T) {
	agent := "agent-tamper"
	liveSession(t, agent, stack.SessionOptions{})
	owner := st.Replicas[1]
	t.Cleanup(func() { owner.SetHooks(nil) })

	// A real envelope of an earlier request, to replay against a later one.
	var earlier atomic.Pointer[[]byte]
	owner.SetHooks(&stack.Hooks{OnEnvelope: func(b []byte) []byte { c := append([]byte(nil), b...); earlier.Store(&c); return b }})
	if a := client.Poll(t, agent); a.Summary() != "200 frame" {
		t.Fatalf("control: %s", a.Summary())
	}

	cases := []struct {
		name   string
		tamper func([]byte) []byte
	}{
		{"publicKey_altered", mutateField("publicKey", flip)},
		{"publicKey_of_another_point", mutateField("publicKey", func(string) string {
			k, _ := envelope.GenerateKey(rand.Reader)
			return envelope.PublicKeyHex(k)
		})},
		{"iv_altered", mutateField("iv", flip)},
		{"tag_altered", mutateField("tag", flip)},
		{"tag_truncated", mutateField("tag", func(s string) string { return s[:len(s)-2] })},
		{"ciphertext_altered", mutateField("ciphertext", flip)},
		{"ciphertext_truncated", mutateField("ciphertext", func(s string) string { return s[:len(s)/2] })},
		{"field_missing", func(b []byte) []byte { return bytes.Replace(b, []byte(`"iv":`), []byte(`"iw":`), 1) }},
		{"extra_field", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`{"envelope":{`), []byte(`{"envelope":{"x":"1",`), 1)
		}},
		{"envelope_of_another_request_replayed", func([]byte) []byte { return *earlier.Load() }},
		{"not_JSON", func([]byte) []byte { return []byte("not json") }},
		{"empty", func([]byte) []byte { return nil }},
		{"plaintext_page_instead_of_envelope", func([]byte) []byte {
			return []byte(`{"live":true,"page":{"url":"https://evil.example","title":"x","capturedAt":"2026-11-30T00:00:00.000Z","contentType":"image/jpeg","data":"/9j/2Q=="}}`)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			observed := ""
			record(t, "Tampering (envelope altered at the owning replica)", "503; never a frame, never live:false", &observed)
			owner.SetHooks(&stack.Hooks{OnEnvelope: tc.tamper})
			a := client.Poll(t, agent)
			owner.SetHooks(nil)
			observed = a.Summary()
			if a.Status != http.StatusServiceUnavailable {
				t.Errorf("got %s", observed)
			}
		})
	}
	t.Run("untampered_afterwards", func(t *testing.T) {
		observed := ""
		record(t, "Tampering (envelope altered at the owning replica)", "200 frame", &observed)
		observed = client.Poll(t, agent).Summary()
		if observed != "200 frame" {
			t.Errorf("got %s", observed)
		}
	})
}

func TestForgedPagesAreValidated(t *testing.T) {
	agent := client.NewAgent(t, "agent-forged")
	// A forging broker: it redeems the grant as a real one does, then seals whatever
	// page the test chose; a compromised or buggy broker's output must still be validated.
	fb := &stack.SealingBroker{}
	ss := stacktest.StartSession(client.Context(t), t, st, agent, stack.SessionOptions{Replica: 1, BrokerHandler: fb})
	if err := fb.Redeem(st.LB, ss.Passes.Broker); err != nil {
		t.Fatal(err)
	}

	var pngBuf bytes.Buffer
	_ = png.Encode(&pngBuf, image.NewGray(image.Rect(0, 0, 4, 4)))
	page := func(mod func(map[string]any)) []byte {
		p := map[string]any{"url": "https://example.com/", "title": "Example", "capturedAt": "2026-11-30T12:00:00.000Z", "contentType": "image/jpeg", "data": stacktest.EncodeJPEG(t, 64, 48)}
		if mod != nil {
			mod(p)
		}
		b, _ := json.Marshal(p)
		return b
	}
	_ = color.Black
	cases := []struct {
		name  string
		plain []byte
		want  string
	}{
		{"valid_page_control", page(nil), "200 frame"},
		{"not_a_JPEG_PNG_bytes", page(func(p map[string]any) { p["data"] = base64.StdEncoding.EncodeToString(pngBuf.Bytes()) }), "503"},
		{"JPEG_without_end_marker", page(func(p map[string]any) {
			raw, _ := stacktest.DecodeBase64(stacktest.EncodeJPEG(t, 64, 48))
			p["data"] = base64.StdEncoding.EncodeToString(raw[:len(raw)-2])
		}), "503"},
		{"JPEG_wider_than_1280", page(func(p map[string]any) { p["data"] = stacktest.EncodeJPEG(t, 1600, 100) }), "503"},
		{"JPEG_taller_than_2000", page(func(p map[string]any) { p["data"] = stacktest.EncodeJPEG(t, 100, 2100) }), "503"},
		{"other_content_type", page(func(p map[string]any) { p["contentType"] = "image/png" }), "503"},
		{"capturedAt_not_UTC_milliseconds", page(func(p map[string]any) { p["capturedAt"] = "2026-11-30T12:00:00+01:00" }), "503"},
		{"unknown_field", page(func(p map[string]any) { p["script"] = "alert(1)" }), "503"},
		{"not_JSON", []byte("<html>"), "503"},
		{"no_tab_null_control", []byte("null"), `200 {"live":true,"page":null}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			observed := ""
			record(t, "Tampering (pages sealed by a forging broker)", tc.want, &observed)
			fb.Seal(tc.plain)
			observed = client.Poll(t, agent).Summary()
			if observed != tc.want {
				t.Errorf("got %s, want %s", observed, tc.want)
			}
		})
	}
}

func TestAPageCannotHideFromViewers(t *testing.T) {
	observed := ""
	record(t, "Tampering (pages sealed by a forging broker)", "a page that makes its URL 20 KiB and its title 5 KiB long is still seen: both shortened on a character boundary, 200 frame", &observed)
	agent := "agent-hiding"
	ss := liveSession(t, agent, stack.SessionOptions{})
	if _, err := ss.Tool(client.Context(t), "browser_open", map[string]string{"url": st.Site + "/hiding.html"}); err != nil {
		t.Fatal(err)
	}
	var page wire.Page
	testenv.WaitFor(t, 20*time.Second, "a frame of the hiding page", func() bool {
		a := client.Poll(t, agent)
		var res struct {
			Page *wire.Page `json:"page"`
		}
		if a.Status != 200 || json.Unmarshal([]byte(a.Body), &res) != nil || res.Page == nil || !strings.Contains(res.Page.URL, "hiding.html?qq") {
			return false
		}
		page = *res.Page
		return true
	})
	if len(page.URL) != wire.MaxURLBytes || len(page.Title) > wire.MaxTitleBytes || !utf8.ValidString(page.Title) || strings.Contains(page.Title, "end") {
		t.Fatalf("url of %d bytes, title of %d bytes", len(page.URL), len(page.Title))
	}
	observed = fmt.Sprintf("200 frame; url %d bytes, title %d bytes (valid UTF-8)", len(page.URL), len(page.Title))
}
