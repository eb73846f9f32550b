package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/wire"
)

// The document's path and the Reason constants', relative to this package.
const (
	testDoc     = "../../../docs/operating.md"
	testReasons = "../../reason.go"
)

// TestDocIsGenerated: docs/operating.md's tables of the reasons and of every
// listener's errors are what the failure table says; `go generate ./wire` writes them.
func TestDocIsGenerated(t *testing.T) {
	doc, err := os.ReadFile(testDoc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(doc, testReasons)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, want) {
		t.Fatalf("%s is not what the failure table says: run `go generate ./wire`", testDoc)
	}
}

// Every reason has a row of the reasons' table and a meaning from its constant's doc
// comment; every listener answers something in the listeners' table.
func TestTablesCoverTheFailureTable(t *testing.T) {
	meanings, err := reasonMeanings(testReasons)
	if err != nil {
		t.Fatal(err)
	}
	reasons, err := reasonsTable(meanings)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range wire.Labels() {
		if !strings.Contains(reasons, "| `"+r+"` |") {
			t.Errorf("reason %s is not in the table", r)
		}
		if m := meanings[r]; m == "" || strings.HasPrefix(m, "Reason") {
			t.Errorf("reason %s means %q", r, m)
		}
	}
	listeners := listenersTable()
	for _, l := range wire.AllListeners() {
		if !strings.Contains(listeners, "| "+l.Names()[0]) && !strings.Contains(listeners, ", "+l.Names()[0]) {
			t.Errorf("listener %s answers nothing in the table", l.Names()[0])
		}
	}
	if _, err := replaceBlock([]byte("no markers"), blockReasons, ""); err == nil {
		t.Error("a document without the markers was rewritten")
	}
}
