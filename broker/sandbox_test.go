package broker

import (
	"slices"
	"testing"
)

// TestChromiumEnv: Chromium's environment is the broker's making, with only the locale
// and time zone of the caller's.
func TestChromiumEnv(t *testing.T) {
	got := chromiumEnv([]string{
		"PATH=/opt/evil", "HOME=/root", "AGENTFY_BROKER_PASS=s3cret", "OTEL_EXPORTER_OTLP_HEADERS=authorization=key",
		"TMPDIR=/var/private", "HTTPS_PROXY=http://user:pw@proxy", "LANG=ru_RU.UTF-8", "TZ=Europe/Moscow", "LD_PRELOAD=/x.so", "XLANG=1",
	}, "/p/data", "/p/data/tmp")
	want := []string{
		"PATH=" + chromiumPath, "HOME=/p/data", "XDG_CONFIG_HOME=/p/data/.config", "XDG_CACHE_HOME=/p/data/.cache", "TMPDIR=/p/data/tmp",
		"LANG=ru_RU.UTF-8", "TZ=Europe/Moscow",
	}
	if !slices.Equal(got, want) {
		t.Errorf("chromiumEnv() = %q\nwant %q", got, want)
	}
}
