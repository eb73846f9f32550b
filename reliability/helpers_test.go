package reliability

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func itoa(n int) string { return strconv.Itoa(n) }

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
