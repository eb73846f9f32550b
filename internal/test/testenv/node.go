package testenv

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nodeTimeout bounds one run of the Node reference, start-up included.
const nodeTimeout = 20 * time.Second

// RepoRoot returns the module root: the nearest directory, walking up from
// the working directory, that holds go.mod. It fails the test if there is none.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatalf("testenv: working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// NodeOpen opens body, a wire body {"envelope":{...}}, with the Node reference
// opener. It returns the plaintext, or an error carrying Node's stderr when
// Node refuses the envelope, times out after 20 s, or body is not JSON. It
// fails the test if node is not on PATH.
func NodeOpen(tb testing.TB, priv *ecdh.PrivateKey, requestID string, body []byte) ([]byte, error) {
	tb.Helper()
	input, err := json.Marshal(struct { //nolint:gosec // G117: a test key, passed to the Node reference on purpose
		PrivateKey string          `json:"privateKey"`
		RequestID  string          `json:"requestId"`
		Body       json.RawMessage `json:"body"`
	}{hex.EncodeToString(priv.Bytes()), requestID, body})
	if err != nil {
		return nil, fmt.Errorf("node open: encode input: %w", err)
	}
	return runNode(tb, "open", input)
}

// NodeSeal seals plaintext to pub for requestID with the Node reference and
// returns the wire body. It fails the test if Node fails or is not on PATH.
func NodeSeal(tb testing.TB, pub *ecdh.PublicKey, requestID string, plaintext []byte) []byte {
	tb.Helper()
	input, err := json.Marshal(map[string]string{
		"publicKey": hex.EncodeToString(pub.Bytes()),
		"requestId": requestID,
		"plaintext": base64.StdEncoding.EncodeToString(plaintext),
	})
	if err != nil {
		tb.Fatalf("node seal: encode input: %v", err)
	}
	body, err := runNode(tb, "seal", input)
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// runNode runs scripts/envelope.mjs with the given subcommand and stdin.
func runNode(tb testing.TB, command string, stdin []byte) ([]byte, error) {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Fatal("testenv: node is not on PATH; the envelope interoperability tests need Node 20 or later")
	}
	ctx, cancel := context.WithTimeout(tb.Context(), nodeTimeout)
	defer cancel()
	script := filepath.Join(RepoRoot(tb), "scripts", "envelope.mjs")
	cmd := exec.CommandContext(ctx, node, script, command) //nolint:gosec // G204: node is from LookPath, the script and subcommands are ours
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// WaitDelay keeps a killed node's lingering pipes from outliving the deadline.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node %s: %w: %s", command, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}
