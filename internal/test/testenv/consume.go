package testenv

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/wire"
)

// maxConsumeBody bounds the request body the fake reads, as the real route does.
const maxConsumeBody = 1 << 10 // 1 KiB

// ConsumeAPI is the replicas' consume route (POST wire.ConsumePath) as a broker meets it, for
// tests of a broker without the stack. It hands out request ids bound to fresh key pairs
// (Issue) and redeems each once, for its one broker pass, with the public key, as the
// real route does; Refuse and Answer force every answer instead. It is an
// http.Handler: serve it with httptest.NewServer, or wrap it to watch or hold calls.
//
// Its answers: 404 for another method or path, 403 for another credential, 400 for a
// body that is not a JSON request, the forced status or body when set, 404 for an id
// not issued or already redeemed, else 200 {"publicKey":"04…"}.
type ConsumeAPI struct {
	pass string

	mu     sync.Mutex
	keys   map[string]*ecdh.PrivateKey // issued and not yet redeemed; guarded by mu
	status int                         // forced status, 0 for none; guarded by mu
	body   string                      // forced 200 body, "" for none; guarded by mu
}

// NewConsumeAPI returns a ConsumeAPI that redeems for the broker pass pass only.
func NewConsumeAPI(pass string) *ConsumeAPI {
	return &ConsumeAPI{pass: pass, keys: make(map[string]*ecdh.PrivateKey)}
}

// ServeHTTP answers one consume request.
func (a *ConsumeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != wire.ConsumePath {
		http.NotFound(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+a.pass {
		http.Error(w, `{"error":"forbidden"}`, http.StatusForbidden)
		return
	}
	var req struct {
		RequestID string `json:"requestId"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, maxConsumeBody)).Decode(&req); err != nil {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.status != 0 {
		http.Error(w, `{"error":"refused"}`, a.status)
		return
	}
	if a.body != "" {
		_, _ = io.WriteString(w, a.body)
		return
	}
	k, ok := a.keys[req.RequestID]
	delete(a.keys, req.RequestID)
	if !ok {
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"publicKey": envelope.PublicKeyHex(k)})
}

// Issue makes a request id bound to a fresh key pair, as a requesting replica does, and
// returns the id and the private key that opens the broker's envelope.
func (a *ConsumeAPI) Issue(tb testing.TB) (string, *ecdh.PrivateKey) {
	tb.Helper()
	var id [32]byte
	if _, err := rand.Read(id[:]); err != nil {
		tb.Fatal(err)
	}
	k, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	requestID := hex.EncodeToString(id[:])
	a.mu.Lock()
	a.keys[requestID] = k
	a.mu.Unlock()
	return requestID, k
}

// Refuse makes every consumption answer status with a JSON error (0 restores).
func (a *ConsumeAPI) Refuse(status int) {
	a.mu.Lock()
	a.status = status
	a.mu.Unlock()
}

// Answer makes every consumption answer 200 with body ("" restores).
func (a *ConsumeAPI) Answer(body string) {
	a.mu.Lock()
	a.body = body
	a.mu.Unlock()
}
