package reliability

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func itoa(n int) string { return strconv.Itoa(n) }

// descendants lists the live processes below pid, from /proc.
func descendants(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			parent[p], _ = strconv.Atoi(fields[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

func tabID(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var tab struct {
		TabID string `json:"tabId"`
	}
	if err := json.Unmarshal(res, &tab); err != nil || tab.TabID == "" {
		t.Fatalf("tool result without a tab id: %v", err)
	}
	return tab.TabID
}

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }
