package broker

import (
	"bytes"
	"encoding/base64"
	"math"
	"testing"

	"github.com/go-rod/rod/lib/proto"

	"github.com/agentfy/agentfy/wire"
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

func TestCaptureClip(t *testing.T) {
	tests := []struct {
		name      string
		vv        *proto.PageVisualViewport
		dpr       float64
		want      proto.PageViewport
		wantWidth float64 // output width in image pixels
		wantErr   bool
	}{
		{
			name: "laptop viewport is kept",
			vv:   &proto.PageVisualViewport{ClientWidth: 1280, ClientHeight: 800},
			dpr:  1, want: proto.PageViewport{Width: 1280, Height: 800, Scale: 1}, wantWidth: 1280,
		},
		{
			name: "full hd is scaled to 1280",
			vv:   &proto.PageVisualViewport{ClientWidth: 1920, ClientHeight: 1080},
			dpr:  1, want: proto.PageViewport{Width: 1920, Height: 1080, Scale: 1280.0 / 1920}, wantWidth: 1280,
		},
		{
			name: "tall viewport is clipped to 2000 before scaling",
			vv:   &proto.PageVisualViewport{ClientWidth: 1920, ClientHeight: 3000},
			dpr:  1, want: proto.PageViewport{Width: 1920, Height: 2000, Scale: 1280.0 / 1920}, wantWidth: 1280,
		},
		{
			name: "scrolled page keeps its offset",
			vv:   &proto.PageVisualViewport{PageX: 10, PageY: 600, ClientWidth: 800, ClientHeight: 600},
			dpr:  1, want: proto.PageViewport{X: 10, Y: 600, Width: 800, Height: 600, Scale: 1}, wantWidth: 800,
		},
		{
			name: "device pixel ratio counts in the width",
			vv:   &proto.PageVisualViewport{ClientWidth: 1280, ClientHeight: 800},
			dpr:  2, want: proto.PageViewport{Width: 1280, Height: 800, Scale: 0.5}, wantWidth: 1280,
		},
		{
			name: "a narrow tall viewport at ratio 2 gets one image pixel per CSS pixel",
			vv:   &proto.PageVisualViewport{ClientWidth: 800, ClientHeight: 3000},
			dpr:  2, want: proto.PageViewport{Width: 800, Height: 2000, Scale: 0.5}, wantWidth: 800,
		},
		{
			name: "ratio 3 and full hd",
			vv:   &proto.PageVisualViewport{ClientWidth: 1920, ClientHeight: 1080},
			dpr:  3, want: proto.PageViewport{Width: 1920, Height: 1080, Scale: 1280.0 / 1920 / 3}, wantWidth: 1280,
		},
		{
			name: "unknown ratio is 1",
			vv:   &proto.PageVisualViewport{ClientWidth: 640, ClientHeight: 480},
			dpr:  math.NaN(), want: proto.PageViewport{Width: 640, Height: 480, Scale: 1}, wantWidth: 640,
		},
		{name: "empty viewport", vv: &proto.PageVisualViewport{ClientWidth: 0, ClientHeight: 800}, dpr: 1, wantErr: true},
		{name: "no viewport", vv: nil, dpr: 1, wantErr: true},
		{name: "NaN viewport", vv: &proto.PageVisualViewport{ClientWidth: math.NaN(), ClientHeight: 800}, dpr: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := captureClip(tt.vv, tt.dpr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("captureClip() error = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if *got != tt.want {
				t.Errorf("captureClip() = %+v, want %+v", *got, tt.want)
			}
			dpr := tt.dpr
			if !(dpr > 0) {
				dpr = 1
			}
			if w := got.Width * got.Scale * dpr; math.Abs(w-tt.wantWidth) > 1e-9 || w > wire.MaxFrameWidth {
				t.Errorf("output width %v, want %v", w, tt.wantWidth)
			}
		})
	}
}

func TestDevicePixelRatio(t *testing.T) {
	tests := []struct {
		name string
		m    proto.PageGetLayoutMetricsResult
		want float64
	}{
		{"missing", proto.PageGetLayoutMetricsResult{}, 1},
		{"one", proto.PageGetLayoutMetricsResult{LayoutViewport: &proto.PageLayoutViewport{ClientWidth: 1280}, CSSLayoutViewport: &proto.PageLayoutViewport{ClientWidth: 1280}}, 1},
		{"two", proto.PageGetLayoutMetricsResult{LayoutViewport: &proto.PageLayoutViewport{ClientWidth: 2560}, CSSLayoutViewport: &proto.PageLayoutViewport{ClientWidth: 1280}}, 2},
		{"zero css width", proto.PageGetLayoutMetricsResult{LayoutViewport: &proto.PageLayoutViewport{ClientWidth: 2560}, CSSLayoutViewport: &proto.PageLayoutViewport{}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := devicePixelRatio(&tt.m); got != tt.want {
				t.Errorf("devicePixelRatio() = %v, want %v", got, tt.want)
			}
		})
	}
}

// isJPEG is the requesting replica's check of a frame (wire.CheckFrame, tested there).
func isJPEG(b []byte) bool { return wire.CheckFrame(b) == nil }
