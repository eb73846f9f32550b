package testenv

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// Scrape asks h for /metrics and returns every sample it serves, keyed by
// name{labels} as exposed (labels sorted by name): the tests of a metrics handler
// that runs in the test's own process (package api and its metrics). Tests of a
// running stack read its listener through stacktest.Client.Metrics.
func Scrape(tb testing.TB, h http.Handler) map[string]float64 {
	tb.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequestWithContext(tb.Context(), http.MethodGet, "/metrics", nil))
	if w.Code != http.StatusOK {
		tb.Fatalf("/metrics answered %d", w.Code)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			tb.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}
