package view_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/jsonrpc"
	"github.com/agentfy/agentfy/view"
	"github.com/agentfy/agentfy/wire"
)

// TestSizeChainAgrees: the largest page the API accepts, sealed, fits every bound on
// its way — the NATS message (bus.MaxPayload, which the deployment template sets
// too), the JSON-RPC message that carries it from the worker, and the reply the
// requester reads — and wire.MaxSealedBytes is a true bound of it.
func TestSizeChainAgrees(t *testing.T) {
	jpeg := append([]byte{0xFF, 0xD8, 0xFF}, bytes.Repeat([]byte{0xAB}, wire.MaxFrameBytes-5)...)
	jpeg = append(jpeg, 0xFF, 0xD9)
	// A URL and title of the worst kind for JSON: every byte escaped; the largest count
	// and the longest reason.
	hidden := slices.MaxFunc(wire.HiddenReasons, func(a, b string) int { return len(a) - len(b) })
	page, err := json.Marshal(wire.Page{
		URL: strings.Repeat("\x01", wire.MaxURLBytes), Title: strings.Repeat("\x02", wire.MaxTitleBytes),
		CapturedAt: "2026-11-30T12:00:00.000Z", ContentType: wire.ContentTypeJPEG, Data: base64.StdEncoding.EncodeToString(jpeg),
		Masked: wire.MaxMasked, Hidden: hidden,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(page) > wire.MaxPlaintextBytes {
		t.Fatalf("the largest page is %d bytes, MaxPlaintextBytes %d", len(page), wire.MaxPlaintextBytes)
	}
	key, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	env, err := envelope.Seal(rand.Reader, key.PublicKey(), hex.EncodeToString(id), page)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := json.Marshal(envelope.Sealed{Envelope: env})
	if err != nil {
		t.Fatal(err)
	}
	rpc, err := jsonrpc.NewResult(1<<53, sealed)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what  string
		size  int
		bound int
	}{
		{"sealed page ≤ wire.MaxSealedBytes", len(sealed), wire.MaxSealedBytes},
		{"wire.MaxSealedBytes ≤ bus.MaxPayload (NATS max_payload)", wire.MaxSealedBytes, bus.MaxPayload},
		{"wire.MaxSealedBytes ≤ view.MaxReply", wire.MaxSealedBytes, view.MaxReply},
		{"JSON-RPC result ≤ jsonrpc.MaxMessage", len(rpc) - len(sealed) + wire.MaxSealedBytes, jsonrpc.MaxMessage},
		{"page ≤ envelope.MaxPlaintext", wire.MaxPlaintextBytes, envelope.MaxPlaintext},
	} {
		if c.size > c.bound {
			t.Errorf("%s: %d > %d", c.what, c.size, c.bound)
		}
	}
	t.Logf("largest sealed page %d bytes (%.2f MiB); NATS max_payload %d", len(sealed), float64(len(sealed))/(1<<20), bus.MaxPayload)
}
