package broker

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateURL(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		wantErr bool
	}{
		{"http", "http://example.test/a?b=c", false},
		{"https", "https://example.test/", false},
		{"about blank", "about:blank", false},
		{"file", "file:///etc/passwd", true},
		{"javascript", "javascript:alert(1)", true},
		{"data", "data:text/html,hi", true},
		{"chrome", "chrome://settings", true},
		{"no host", "http:///path", true},
		{"relative", "/path", true},
		{"empty", "", true},
		{"other about", "about:config", true},
		{"too long", "https://example.test/" + strings.Repeat("a", MaxURLBytes), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateURL(tt.url)
			if (err != nil) != tt.wantErr {
				t.Fatalf("validateURL(%q) = %v, wantErr %v", tt.url, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrBadURL) {
				t.Errorf("error %v is not ErrBadURL", err)
			}
		})
	}
}

func TestValidateStep(t *testing.T) {
	tests := []struct {
		name    string
		step    Step
		wantErr error
	}{
		{"navigate", Step{Action: ActionNavigate, URL: "https://example.test/"}, nil},
		{"navigate file", Step{Action: ActionNavigate, URL: "file:///etc/passwd"}, ErrBadURL},
		{"navigate with selector", Step{Action: ActionNavigate, URL: "https://example.test/", Selector: "a"}, ErrBadStep},
		{"click", Step{Action: ActionClick, Selector: "#b"}, nil},
		{"click without selector", Step{Action: ActionClick}, ErrBadStep},
		{"click with huge selector", Step{Action: ActionClick, Selector: strings.Repeat("a", MaxSelectorBytes+1)}, ErrBadStep},
		{"type", Step{Action: ActionType, Selector: "#q", Text: "hello"}, nil},
		{"type empty text", Step{Action: ActionType, Selector: "#q"}, nil},
		{"type too much", Step{Action: ActionType, Selector: "#q", Text: strings.Repeat("a", MaxTextBytes+1)}, ErrBadStep},
		{"press enter", Step{Action: ActionPress, Key: "Enter"}, nil},
		{"press unknown key", Step{Action: ActionPress, Key: "F13"}, ErrBadStep},
		{"press with text", Step{Action: ActionPress, Key: "Enter", Text: "x"}, ErrBadStep},
		{"scroll", Step{Action: ActionScroll, Y: 600}, nil},
		{"scroll up", Step{Action: ActionScroll, Y: -600}, nil},
		{"scroll nowhere", Step{Action: ActionScroll}, ErrBadStep},
		{"scroll too far", Step{Action: ActionScroll, Y: MaxScroll + 1}, ErrBadStep},
		{"wait", Step{Action: ActionWait, MS: 5000}, nil},
		{"wait longest", Step{Action: ActionWait, MS: MaxWaitStep.Milliseconds()}, nil},
		{"wait too long", Step{Action: ActionWait, MS: MaxWaitStep.Milliseconds() + 1}, ErrBadStep},
		{"wait zero", Step{Action: ActionWait}, ErrBadStep},
		{"wait negative", Step{Action: ActionWait, MS: -1}, ErrBadStep},
		{"unknown action", Step{Action: "evaluate", Text: "alert(1)"}, ErrBadStep},
		{"no action", Step{}, ErrBadStep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validateStep(tt.step)
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("validateStep(%+v) = %v, want %v", tt.step, err, tt.wantErr)
			}
		})
	}
}

func TestStatusOf(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantCode   string
	}{
		{"bad request id", ErrBadRequestID, 400, "bad_request"},
		{"busy", ErrBusy, 409, "busy"},
		{"wrapped refusal", errors.Join(errors.New("x"), ErrGrantRefused), 502, "refused"},
		{"capture", ErrCaptureFailed, 503, "capture"},
		{"queue", ErrQueueFull, 429, "queue_full"},
		{"unknown tab", ErrUnknownTab, 404, "unknown_tab"},
		{"bad body", ErrBadBody, 400, "bad_request"},
		{"too large", ErrBodyTooLarge, 413, "body_too_large"},
		{"timeout", ErrToolTimeout, 504, "tool_timeout"},
		{"closed", ErrClosed, 503, "broker_down"},
		{"internal", errors.New("cdp: secret detail"), 500, "broker_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := statusOf(tt.err)
			if got.status != tt.wantStatus || got.code != tt.wantCode {
				t.Errorf("statusOf(%v) = %d %s, want %d %s", tt.err, got.status, got.code, tt.wantStatus, tt.wantCode)
			}
			if strings.Contains(got.message, "secret") {
				t.Errorf("message %q leaks the error", got.message)
			}
		})
	}
}
