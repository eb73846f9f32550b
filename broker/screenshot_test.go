package broker

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// screenshotData reads Chromium's capture result to the JPEG, ignoring members it may
// add, and fails on anything that is not an object with base64 data.
func TestScreenshotData(t *testing.T) {
	frame := []byte{0xff, 0xd8, 0xff, 0xe0, 9, 8, 7, 6, 5, 0xff, 0xd9}
	text := base64.StdEncoding.EncodeToString(frame)
	for _, tc := range []struct {
		name, raw string
		fails     bool
	}{
		{"as Chromium writes it", `{"data":"` + text + `"}`, false},
		{"with spaces", " { \"data\" : \"" + text + "\" } ", false},
		{"another member", `{"data":"` + text + `","x":1}`, false},
		{"not base64", `{"data":"**"}`, true},
		{"not an object", `"` + text + `"`, true},
		{"trailing garbage", `{"data":"` + text + `"}x`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := screenshotData([]byte(tc.raw))
			if tc.fails {
				if err == nil {
					t.Fatalf("accepted %s", tc.raw)
				}
				return
			}
			if err != nil || !bytes.Equal(data, frame) {
				t.Fatalf("%s: %x, %v", tc.raw, data, err)
			}
		})
	}
}
