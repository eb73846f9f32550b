package dev

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// module is this module's path.
const module = "github.com/agentfy/agentfy"

// TestNoTestingLinked checks that no command and nothing of the development layer
// depends on the testing package or on the test harness (internal/test): the
// development command would link them, and the layer under the harness would depend
// on it.
func TestNoTestingLinked(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	roots := []string{module + "/cmd/...", module + "/internal/dev/...", module + "/deploy/composecheck"}
	args := append([]string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, roots...)
	out, err := exec.CommandContext(ctx, "go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 5 {
		t.Fatalf("go list listed %d packages, want the commands and internal/dev:\n%s", len(lines), out)
	}
	for _, line := range lines {
		pkg, deps, _ := strings.Cut(line, " ")
		var bad []string
		for _, dep := range strings.Fields(deps) {
			if dep == "testing" || dep == module+"/internal/test" || strings.HasPrefix(dep, module+"/internal/test/") {
				bad = append(bad, dep)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s depends on %s", pkg, strings.Join(bad, ", "))
		}
	}
}
