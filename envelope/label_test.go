package envelope_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/agentfy/agentfy/envelope"
)

// TestLabelsKeepKindsApart: a tool call does not open as a view page, nor a page as a
// tool call, nor either as a result sealed from a replica's key.
func TestLabelsKeepKindsApart(t *testing.T) {
	recipient, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sender, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(make([]byte, 32))
	plain := []byte(`{"name":"browser_tabs","arguments":{}}`)
	call, err := envelope.SealToolCall(rand.Reader, recipient.PublicKey(), id, plain)
	if err != nil {
		t.Fatal(err)
	}
	page, err := envelope.Seal(rand.Reader, recipient.PublicKey(), id, plain)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := envelope.OpenToolCall(recipient, id, call); err != nil || string(got) != string(plain) {
		t.Fatalf("tool call: %q, %v", got, err)
	}
	if got, err := envelope.Open(recipient, id, page); err != nil || string(got) != string(plain) {
		t.Fatalf("page: %q, %v", got, err)
	}
	for name, open := range map[string]func() ([]byte, error){
		"tool call as a page":   func() ([]byte, error) { return envelope.Open(recipient, id, call) },
		"page as a tool call":   func() ([]byte, error) { return envelope.OpenToolCall(recipient, id, page) },
		"tool call as a result": func() ([]byte, error) { return envelope.OpenFrom(recipient, sender.PublicKey(), id, call) },
	} {
		if _, err := open(); !errors.Is(err, envelope.ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", name, err)
		}
	}
}
