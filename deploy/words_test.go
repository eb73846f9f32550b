package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// retired are the words the code no longer uses for the things of a view (wire.go's
// glossary): a view is not an "observation", the broker does not "observe", and the
// record a broker redeems is a grant, not a "capability". Each is matched in any case
// and inside identifiers (spanObserve), but not as "observed" or "observer", which are
// English and a browser API (MutationObserver).
var retired = []string{"observ", "capabilit"}

// keptWords are the strings that keep a retired word because something outside the
// code depends on them: routes, variables, metric names, a reason, file names, key
// derivation labels, the hello's member and its refusals, and names of other APIs. They
// are cut out of a line before it is searched.
var keptWords = []string{
	// Routes of the contract (SPEC.md): the broker socket's path and the consume route.
	"/observe", "worker-observations",
	// Operators' names: an environment variable, a secret's file, metric names and the
	// reason a forged grant is logged with.
	"AGENTFY_CAPABILITY_KEY", "capability-key", "agentfy_capability_forged_total",
	"forged_capability", "agentfy_observation_waiters",
	// HKDF labels: changing one would change every derived key.
	"agentfy capability key v1", "agentfy capability v1",
	// The consume route's 404 message (view/grant.go).
	"capability not found",
	// The worker's hello names its tools "capabilities" (a JSON member), and its
	// refusals name the member.
	`"capabilities"`, `\"capabilities\"`, `"Capabilities"`, "capabilities:", "too many capabilities", "bad capability",
	// Other APIs: Prometheus observers, the DOM's observers, Linux capabilities and the
	// Jaeger module's own packages.
	".Observe(", ".observe(", "Linux capabilit", "CAP_",
}

// retiredWordsSkipped are the trees the check does not read: generated and vendored
// files, and the fuzz corpora.
var retiredWordsSkipped = map[string]bool{
	".git": true, "node_modules": true, "dist": true, "testdata": true, "tools": true,
}

// TestRetiredWords fails on a retired word anywhere in the repository's code, scripts
// and documents outside the strings that must keep it, and outside a line that cites
// the SPEC or the seed documents, which use them.
func TestRetiredWords(t *testing.T) {
	read := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if retiredWordsSkipped[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".ts", ".mjs", ".js", ".yml", ".yaml", ".sh", ".tmpl", ".conf", ".html", ".css", ".json", ".Dockerfile":
		default:
			return nil
		}
		if d.Name() == "package-lock.json" || d.Name() == "words_test.go" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		read++
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "SPEC") || strings.Contains(line, "seed") {
				continue
			}
			if w := retiredWord(line); w != "" {
				t.Errorf("%s:%d: %q (a retired word; see wire.go's glossary): %.120s", path, i+1, w, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if read < 200 {
		t.Fatalf("read %d files; the walk from the repository's root found too few", read)
	}
}

// retiredWord returns the first retired word of line once the kept strings are cut
// out, or "".
func retiredWord(line string) string {
	for _, k := range keptWords {
		line = strings.ReplaceAll(line, k, " ")
	}
	lower := strings.ToLower(line)
	for _, r := range retired {
		for off := 0; ; {
			i := strings.Index(lower[off:], r)
			if i < 0 {
				break
			}
			i += off
			rest := lower[i+len(r):]
			off = i + len(r)
			if r == "observ" && (strings.HasPrefix(rest, "ed") || strings.HasPrefix(rest, "er")) {
				continue
			}
			end := i + len(r)
			for end < len(line) && (line[end] >= 'a' && line[end] <= 'z') {
				end++
			}
			return line[i:end]
		}
	}
	return ""
}

// TestRetiredWordMatcher pins what the matcher finds and what it lets pass.
func TestRetiredWordMatcher(t *testing.T) {
	for line, want := range map[string]string{
		"the observation waiters":           "observation",
		"spanObserve, spanCapture":          "Observe",
		"a view capability":                 "capability",
		"POST /observe {requestId}":         "",
		"observed %q, want null":            "",
		"new MutationObserver(see)":         "",
		"m.latency.Observe(took.Seconds())": "",
		`"capabilities":["browserView"]`:    "",
		"drops every Linux capability":      "",
		"the broker observes the tab":       "observes",
	} {
		if got := retiredWord(line); got != want {
			t.Errorf("retiredWord(%q) = %q, want %q", line, got, want)
		}
	}
}
