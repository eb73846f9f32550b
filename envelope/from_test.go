package envelope_test

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/agentfy/agentfy/envelope"
)

// TestSealFrom proves SealFrom's point: only the holder of the sender's key makes an
// envelope that OpenFrom accepts for that sender. Everyone else on the bus knows the
// recipient's public key (it travels in clear), so a plain Seal to it, or a SealFrom
// with another static key, must be refused.
func TestSealFrom(t *testing.T) {
	owner, other, recipient := newKey(t), newKey(t), newKey(t)
	id := newRequestID(t)
	plain := []byte(`{"tabs":[]}`)
	genuine, err := envelope.SealFrom(rand.Reader, owner, recipient.PublicKey(), id, plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := envelope.OpenFrom(recipient, owner.PublicKey(), id, genuine)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("OpenFrom(genuine) = %q, %v", got, err)
	}
	forgedPlain, err := envelope.Seal(rand.Reader, recipient.PublicKey(), id, plain)
	if err != nil {
		t.Fatal(err)
	}
	forgedOther, err := envelope.SealFrom(rand.Reader, other, recipient.PublicKey(), id, plain)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		priv   *ecdh.PrivateKey
		sender *ecdh.PublicKey
		id     string
		env    envelope.Envelope
	}{
		{name: "plain seal to the recipient", priv: recipient, sender: owner.PublicKey(), id: id, env: forgedPlain},
		{name: "sealed from another key", priv: recipient, sender: owner.PublicKey(), id: id, env: forgedOther},
		{name: "expected sender wrong", priv: recipient, sender: other.PublicKey(), id: id, env: genuine},
		{name: "other request id", priv: recipient, sender: owner.PublicKey(), id: newRequestID(t), env: genuine},
		{name: "other recipient", priv: other, sender: owner.PublicKey(), id: id, env: genuine},
		{name: "no sender", priv: recipient, sender: nil, id: id, env: genuine},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := envelope.OpenFrom(tt.priv, tt.sender, tt.id, tt.env); !errors.Is(err, envelope.ErrOpen) {
				t.Fatalf("OpenFrom = %v, want ErrOpen", err)
			}
		})
	}
	// Nor does an authenticated envelope open as a plain one, or the other way round.
	if _, err := envelope.Open(recipient, id, genuine); !errors.Is(err, envelope.ErrOpen) {
		t.Fatalf("Open(SealFrom envelope) = %v, want ErrOpen", err)
	}
	if _, err := envelope.SealFrom(rand.Reader, nil, recipient.PublicKey(), id, plain); err == nil {
		t.Fatal("SealFrom without a sender key succeeded")
	}
}
