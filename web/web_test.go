package web_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/web"
)

func TestFilesServeTheAppAndTheSDK(t *testing.T) {
	files := web.Files()
	for _, name := range []string{"index.html", "app.css", "js/main.js", "js/sdk/index.js", "js/sdk/gen/sdk.gen.js", "js/sdk/poll.js"} {
		b, err := fs.ReadFile(files, name)
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %d bytes, %v", name, len(b), err)
		}
	}
	index, _ := fs.ReadFile(files, "index.html")
	if !strings.Contains(string(index), `"@agentfy/sdk": "./js/sdk/index.js"`) {
		t.Errorf("index.html has no import map for @agentfy/sdk:\n%s", index)
	}
	if _, err := fs.ReadFile(files, "js/sdk/../../index.html"); err == nil {
		t.Error("a path out of js/sdk opened")
	}
}
