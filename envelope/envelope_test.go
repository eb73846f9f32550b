package envelope_test

import (
	"bufio"
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentfy/agentfy/envelope"
	"github.com/agentfy/agentfy/internal/test/testenv"
)

// vector is one file of testdata/envelope, written by scripts/envelope.mjs.
type vector struct {
	name      string
	success   bool
	priv      *ecdh.PrivateKey
	requestID string
	plaintext []byte    // set when the file has a "plaintext" header
	sum       *[32]byte // set when the file has a "plaintext sha256" header
	body      []byte    // the wire body as written
	env       envelope.Envelope
}

// loadVectors parses every file in testdata/envelope at the repository root.
func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	dir := filepath.Join(testenv.RepoRoot(tb), "testdata", "envelope")
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var vs []vector
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		vs = append(vs, parseVector(tb, e.Name(), data))
	}
	if len(vs) == 0 {
		tb.Fatalf("no vectors in %s; run node scripts/envelope.mjs vectors testdata/envelope", dir)
	}
	return vs
}

// parseVector parses a header of "key: value" lines, a blank line, and the
// wire body. It fails the test on unknown, repeated or missing header keys.
func parseVector(tb testing.TB, name string, data []byte) vector {
	tb.Helper()
	header, body, ok := bytes.Cut(data, []byte("\n\n"))
	if !ok {
		tb.Fatalf("%s: no blank line after the header", name)
	}
	v := vector{name: name, body: body}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(header))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			tb.Fatalf("%s: header line %q has no colon", name, sc.Text())
		}
		if value != "" {
			if value, ok = strings.CutPrefix(value, " "); !ok {
				tb.Fatalf("%s: header line %q has no space after the colon", name, sc.Text())
			}
		}
		if seen[key] {
			tb.Fatalf("%s: repeated header %q", name, key)
		}
		seen[key] = true
		switch key {
		case "expect":
			switch value {
			case "success":
				v.success = true
			case "open failure":
			default:
				tb.Fatalf("%s: unknown expect %q", name, value)
			}
		case "comment":
		case "private key":
			b, err := hex.DecodeString(value)
			if err != nil {
				tb.Fatalf("%s: private key: %v", name, err)
			}
			if v.priv, err = ecdh.P256().NewPrivateKey(b); err != nil {
				tb.Fatalf("%s: private key: %v", name, err)
			}
		case "request id":
			v.requestID = value
		case "plaintext":
			b, err := base64.StdEncoding.DecodeString(value)
			if err != nil {
				tb.Fatalf("%s: plaintext: %v", name, err)
			}
			v.plaintext = b
		case "plaintext sha256":
			b, err := hex.DecodeString(value)
			if err != nil || len(b) != sha256.Size {
				tb.Fatalf("%s: plaintext sha256 %q is not 32 bytes of hex", name, value)
			}
			v.sum = (*[32]byte)(b)
		default:
			tb.Fatalf("%s: unknown header %q", name, key)
		}
	}
	for _, key := range []string{"expect", "comment", "private key", "request id"} {
		if !seen[key] {
			tb.Fatalf("%s: missing header %q", name, key)
		}
	}
	if v.success && v.plaintext == nil && v.sum == nil {
		tb.Fatalf("%s: a success vector needs a plaintext or plaintext sha256 header", name)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var sealed envelope.Sealed
	if err := dec.Decode(&sealed); err != nil {
		tb.Fatalf("%s: body: %v", name, err)
	}
	v.env = sealed.Envelope
	return v
}

// check reports whether got, err is what the vector expects.
func (v vector) check(tb testing.TB, got []byte, err error) {
	tb.Helper()
	if !v.success {
		if err == nil {
			tb.Fatalf("opened, want failure (plaintext %.40q)", got)
		}
		return
	}
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	if v.plaintext != nil && !bytes.Equal(got, v.plaintext) {
		tb.Fatalf("plaintext %.40q, want %.40q", got, v.plaintext)
	}
	if v.sum != nil && sha256.Sum256(got) != *v.sum {
		tb.Fatalf("plaintext sha256 %x, want %x", sha256.Sum256(got), *v.sum)
	}
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			got, err := envelope.Open(v.priv, v.requestID, v.env)
			if err != nil && (!errors.Is(err, envelope.ErrOpen) || err != envelope.ErrOpen) {
				t.Fatalf("error %v, want exactly ErrOpen", err)
			}
			if err != nil && got != nil {
				t.Fatalf("failed open returned %d bytes", len(got))
			}
			v.check(t, got, err)
			// OpenTo decides the same, in a lent buffer large enough or not.
			for _, size := range []int{0, 64 << 10} {
				lent, err2 := envelope.OpenTo(make([]byte, size), v.priv, v.requestID, v.env)
				if err2 != err || !bytes.Equal(lent, got) || (err2 != nil && lent != nil) {
					t.Fatalf("OpenTo in %d bytes: %d bytes, %v; Open: %d bytes, %v", size, len(lent), err2, len(got), err)
				}
			}
		})
	}
}

// TestVectorsNode checks that the Node reference agrees with every vector, so
// that a vector cannot pass in Go for the wrong reason.
func TestVectorsNode(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			got, err := testenv.NodeOpen(t, v.priv, v.requestID, v.body)
			v.check(t, got, err)
		})
	}
}

func TestGoSealNodeOpen(t *testing.T) {
	tests := []struct {
		name      string
		plaintext []byte
		openID    func(string) string // the request id Node opens with
		wantErr   bool
	}{
		{name: "page", plaintext: page(t, 75<<10)},
		{name: "null", plaintext: []byte("null")},
		{name: "empty", plaintext: []byte{}},
		{name: "wrong request id", plaintext: []byte("null"), openID: func(string) string { return newRequestID(t) }, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			priv := newKey(t)
			id := newRequestID(t)
			env, err := envelope.Seal(rand.Reader, priv.PublicKey(), id, tt.plaintext)
			if err != nil {
				t.Fatal(err)
			}
			body, err := json.Marshal(envelope.Sealed{Envelope: env})
			if err != nil {
				t.Fatal(err)
			}
			openID := id
			if tt.openID != nil {
				openID = tt.openID(id)
			}
			got, err := testenv.NodeOpen(t, priv, openID, body)
			if (err != nil) != tt.wantErr {
				t.Fatalf("NodeOpen error %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && !bytes.Equal(got, tt.plaintext) {
				t.Fatalf("Node opened %d bytes, want the %d sealed", len(got), len(tt.plaintext))
			}
		})
	}
}

func TestNodeSealGoOpen(t *testing.T) {
	tests := []struct {
		name      string
		plaintext []byte
	}{
		{name: "page", plaintext: page(t, 75<<10)},
		{name: "null", plaintext: []byte("null")},
		{name: "empty", plaintext: []byte{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			priv := newKey(t)
			id := newRequestID(t)
			body := testenv.NodeSeal(t, priv.PublicKey(), id, tt.plaintext)
			var sealed envelope.Sealed
			if err := json.Unmarshal(body, &sealed); err != nil {
				t.Fatal(err)
			}
			// Go must write the wire body exactly as Node does.
			again, err := json.Marshal(sealed)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, body) {
				t.Fatalf("Go re-encodes Node's body as\n%.200s\nwant\n%.200s", again, body)
			}
			got, err := envelope.Open(priv, id, sealed.Envelope)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.plaintext) {
				t.Fatalf("opened %d bytes, want the %d sealed", len(got), len(tt.plaintext))
			}
			checkOpenTo(t, priv, id, sealed.Envelope, tt.plaintext)
			if _, err := envelope.Open(priv, newRequestID(t), sealed.Envelope); err != envelope.ErrOpen {
				t.Fatalf("open with another request id: %v, want ErrOpen", err)
			}
		})
	}
}

// wire is the shape of every wire body that Seal produces; the ciphertext is
// checked apart, as regexp is slow on megabytes under the race detector.
var wire = regexp.MustCompile(`^\{"envelope":\{"publicKey":"04[0-9a-f]{128}","iv":"[0-9a-f]{24}","tag":"[0-9a-f]{32}","ciphertext":"[A-Za-z0-9+/=]*"\}\}$`)

// canonicalBase64 reports whether s is the standard padded base64 of some bytes.
func canonicalBase64(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && base64.StdEncoding.EncodeToString(b) == s
}

// checkOpenTo: OpenTo decrypts env in the buffer it is lent when the ciphertext and tag
// fit, and leaves a smaller one alone.
func checkOpenTo(t *testing.T, priv *ecdh.PrivateKey, id string, env envelope.Envelope, plaintext []byte) {
	t.Helper()
	fits := make([]byte, base64.StdEncoding.DecodedLen(len(env.Ciphertext))+16)
	lent, err := envelope.OpenTo(fits, priv, id, env)
	if err != nil || !bytes.Equal(lent, plaintext) || (len(lent) > 0 && &lent[0] != &fits[0]) {
		t.Fatalf("OpenTo in a buffer that fits: %d bytes, %v, in the buffer: %t", len(lent), err, len(lent) > 0 && &lent[0] == &fits[0])
	}
	small := make([]byte, 8)
	lent, err = envelope.OpenTo(small[:0], priv, id, env)
	if err != nil || !bytes.Equal(lent, plaintext) || !bytes.Equal(small, make([]byte, 8)) {
		t.Fatalf("OpenTo in a buffer too small: %d bytes, %v, the buffer %x", len(lent), err, small)
	}
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		plaintext []byte
	}{
		{name: "empty", plaintext: nil},
		{name: "null", plaintext: []byte("null")},
		{name: "page", plaintext: page(t, 75<<10)},
		{name: "max", plaintext: bytes.Repeat([]byte{0xa5}, envelope.MaxPlaintext)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			priv := newKey(t)
			id := newRequestID(t)
			env := seal(t, priv.PublicKey(), id, tt.plaintext)
			body, err := json.Marshal(envelope.Sealed{Envelope: env})
			if err != nil {
				t.Fatal(err)
			}
			if !wire.Match(body) || !canonicalBase64(env.Ciphertext) {
				t.Fatalf("wire body %.200s does not have the wire shape", body)
			}
			got, err := envelope.Open(priv, id, env)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tt.plaintext) {
				t.Fatalf("opened %d bytes, want the %d sealed", len(got), len(tt.plaintext))
			}
			checkOpenTo(t, priv, id, env, tt.plaintext)
			if again := seal(t, priv.PublicKey(), id, tt.plaintext); again.PublicKey == env.PublicKey || again.IV == env.IV {
				t.Fatal("two seals share an ephemeral key or an IV")
			}
		})
	}
}

func TestSealRejects(t *testing.T) {
	priv := newKey(t)
	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := newRequestID(t)
	tests := []struct {
		name      string
		rand      func() *bytes.Reader // nil means crypto/rand.Reader
		recipient *ecdh.PublicKey
		requestID string
		plaintext []byte
		wantErr   bool
	}{
		{name: "valid", recipient: priv.PublicKey(), requestID: id, wantErr: false},
		{name: "empty request id", recipient: priv.PublicKey(), requestID: "", wantErr: true},
		{name: "short request id", recipient: priv.PublicKey(), requestID: id[:63], wantErr: true},
		{name: "long request id", recipient: priv.PublicKey(), requestID: id + "0", wantErr: true},
		{name: "uppercase request id", recipient: priv.PublicKey(), requestID: strings.Repeat("AB", 32), wantErr: true},
		{name: "non-hex request id", recipient: priv.PublicKey(), requestID: id[:63] + "g", wantErr: true},
		{name: "request id with space", recipient: priv.PublicKey(), requestID: id[:63] + " ", wantErr: true},
		{name: "nil recipient", recipient: nil, requestID: id, wantErr: true},
		{name: "X25519 recipient", recipient: x25519.PublicKey(), requestID: id, wantErr: true},
		{name: "oversize plaintext", recipient: priv.PublicKey(), requestID: id, plaintext: make([]byte, envelope.MaxPlaintext+1), wantErr: true},
		{name: "short random source", rand: func() *bytes.Reader { return bytes.NewReader(make([]byte, 11)) }, recipient: priv.PublicKey(), requestID: id, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.Reader
			if tt.rand != nil {
				r = tt.rand()
			}
			_, err := envelope.Seal(r, tt.recipient, tt.requestID, tt.plaintext)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Seal error %v, wantErr %v", err, tt.wantErr)
			}
		})
	}
	t.Run("failing random source", func(t *testing.T) {
		if _, err := envelope.Seal(iotest.ErrReader(errors.New("no entropy")), priv.PublicKey(), id, nil); err == nil {
			t.Fatal("Seal succeeded without an IV")
		}
	})
	t.Run("nil random source", func(t *testing.T) {
		if _, err := envelope.Seal(nil, priv.PublicKey(), id, nil); err == nil {
			t.Fatal("Seal succeeded with a nil random source")
		}
	})
}

func TestOpenRejects(t *testing.T) {
	priv := newKey(t)
	id := newRequestID(t)
	env := seal(t, priv.PublicKey(), id, []byte("null"))
	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	maxLen := base64.StdEncoding.EncodedLen(envelope.MaxPlaintext)
	with := func(f func(*envelope.Envelope)) envelope.Envelope { e := env; f(&e); return e }
	tests := []struct {
		name      string
		priv      *ecdh.PrivateKey
		requestID string
		env       envelope.Envelope
	}{
		{name: "nil private key", priv: nil, requestID: id, env: env},
		{name: "X25519 private key", priv: x25519, requestID: id, env: env},
		{name: "empty request id", priv: priv, requestID: "", env: env},
		{name: "uppercase request id", priv: priv, requestID: strings.Repeat("AB", 32), env: env},
		{name: "request id with newline", priv: priv, requestID: id[:63] + "\n", env: env},
		{name: "zero envelope", priv: priv, requestID: id, env: envelope.Envelope{}},
		{name: "ciphertext over the limit", priv: priv, requestID: id, env: with(func(e *envelope.Envelope) {
			e.Ciphertext = strings.Repeat("A", maxLen+4)
		})},
		// The longest string allowed, unpadded, decodes to MaxPlaintext+1 bytes.
		{name: "ciphertext decoding past the limit", priv: priv, requestID: id, env: with(func(e *envelope.Envelope) {
			e.Ciphertext = strings.Repeat("A", maxLen)
		})},
		{name: "ciphertext with CRLF", priv: priv, requestID: id, env: with(func(e *envelope.Envelope) {
			e.Ciphertext = e.Ciphertext[:4] + "\r\n" + e.Ciphertext[4:]
		})},
		{name: "own public key as sender", priv: priv, requestID: id, env: with(func(e *envelope.Envelope) {
			e.PublicKey = envelope.PublicKeyHex(priv)
		})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.Open(tt.priv, tt.requestID, tt.env)
			if err != envelope.ErrOpen || got != nil {
				t.Fatalf("Open = %d bytes, %v; want nil, ErrOpen", len(got), err)
			}
		})
	}
}

// TestMutations changes every field of a valid envelope one byte or one bit
// at a time, in its wire encoding and in its decoded bytes; each change must
// fail closed.
func TestMutations(t *testing.T) {
	priv := newKey(t)
	id := newRequestID(t)
	plaintext := page(t, 40) // short, so that every ciphertext byte is tried
	env := seal(t, priv.PublicKey(), id, plaintext)
	if _, err := envelope.Open(priv, id, env); err != nil {
		t.Fatal(err)
	}
	hexBytes := func(s string) []byte { b, _ := hex.DecodeString(s); return b }
	b64Bytes := func(s string) []byte { b, _ := base64.StdEncoding.DecodeString(s); return b }
	fields := []struct {
		name   string
		value  string
		decode func(string) []byte
		encode func([]byte) string
		set    func(*envelope.Envelope, string)
	}{
		{"publicKey", env.PublicKey, hexBytes, hex.EncodeToString, func(e *envelope.Envelope, s string) { e.PublicKey = s }},
		{"iv", env.IV, hexBytes, hex.EncodeToString, func(e *envelope.Envelope, s string) { e.IV = s }},
		{"tag", env.Tag, hexBytes, hex.EncodeToString, func(e *envelope.Envelope, s string) { e.Tag = s }},
		{"ciphertext", env.Ciphertext, b64Bytes, base64.StdEncoding.EncodeToString, func(e *envelope.Envelope, s string) { e.Ciphertext = s }},
		{"requestID", id, hexBytes, hex.EncodeToString, nil},
	}
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			var variants []string
			for i := range len(f.value) {
				for _, x := range []byte{0x01, 0x20} {
					variants = append(variants, f.value[:i]+string(f.value[i]^x)+f.value[i+1:])
				}
				variants = append(variants, f.value[:i]+f.value[i+1:])
			}
			b := f.decode(f.value)
			for i := range b {
				for bit := range 8 {
					m := bytes.Clone(b)
					m[i] ^= 1 << bit
					variants = append(variants, f.encode(m))
				}
			}
			variants = append(variants, "", f.value+"a", f.value+"A", f.value+"AAAA", f.value+"00", " "+f.value, f.value+"\n")
			for _, s := range variants {
				e, reqID := env, id
				if f.set != nil {
					f.set(&e, s)
				} else {
					reqID = s
				}
				if got, err := envelope.Open(priv, reqID, e); err != envelope.ErrOpen || got != nil {
					t.Fatalf("%s = %q: Open = %d bytes, %v; want nil, ErrOpen", f.name, s, len(got), err)
				}
			}
		})
	}
}

func TestParsePublicKey(t *testing.T) {
	priv := newKey(t)
	valid := envelope.PublicKeyHex(priv)
	b := priv.PublicKey().Bytes()
	compressed := hex.EncodeToString(append([]byte{2 | b[64]&1}, b[1:33]...))
	offCurve := bytes.Clone(b)
	offCurve[64] ^= 1
	// x = p, the field prime, is out of range even though its encoding fits.
	p, _ := new(big.Int).SetString("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff", 16)
	xIsP := append(append([]byte{4}, p.FillBytes(make([]byte, 32))...), b[33:]...)
	tests := []struct {
		name    string
		hexKey  string
		wantErr bool
	}{
		{name: "valid", hexKey: valid},
		{name: "uppercase", hexKey: strings.ToUpper(valid), wantErr: true},
		{name: "compressed", hexKey: compressed, wantErr: true},
		{name: "hybrid", hexKey: "0" + string("67"[b[64]&1]) + valid[2:], wantErr: true},
		{name: "off curve", hexKey: hex.EncodeToString(offCurve), wantErr: true},
		{name: "x is p", hexKey: hex.EncodeToString(xIsP), wantErr: true},
		{name: "infinity", hexKey: "00", wantErr: true},
		{name: "zero point", hexKey: "04" + strings.Repeat("00", 64), wantErr: true},
		{name: "short", hexKey: valid[:128], wantErr: true},
		{name: "long", hexKey: valid + "00", wantErr: true},
		{name: "odd length", hexKey: valid[:129], wantErr: true},
		{name: "non-hex", hexKey: valid[:129] + "g", wantErr: true},
		{name: "0x prefix", hexKey: "0x" + valid[2:], wantErr: true},
		{name: "empty", hexKey: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := envelope.ParsePublicKey(tt.hexKey)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParsePublicKey error %v, wantErr %v", err, tt.wantErr)
			}
			if err == nil && !got.Equal(priv.PublicKey()) {
				t.Fatal("parsed another key")
			}
		})
	}
}

func TestPublicKeyHex(t *testing.T) {
	priv := newKey(t)
	got := envelope.PublicKeyHex(priv)
	if !regexp.MustCompile(`^04[0-9a-f]{128}$`).MatchString(got) {
		t.Fatalf("PublicKeyHex = %q, want 04 and 128 lowercase hex digits", got)
	}
}

func TestValidRequestID(t *testing.T) {
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{name: "lowercase hex", id: strings.Repeat("0123456789abcdef", 4), want: true},
		{name: "all zero", id: strings.Repeat("0", 64), want: true},
		{name: "uppercase hex", id: strings.Repeat("0123456789ABCDEF", 4), want: false},
		{name: "63 characters", id: strings.Repeat("a", 63), want: false},
		{name: "65 characters", id: strings.Repeat("a", 65), want: false},
		{name: "empty", id: "", want: false},
		{name: "non-hex", id: strings.Repeat("g", 64), want: false},
		{name: "trailing newline", id: strings.Repeat("a", 63) + "\n", want: false},
		{name: "multibyte", id: strings.Repeat("a", 62) + "é", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := envelope.ValidRequestID(tt.id); got != tt.want {
				t.Fatalf("ValidRequestID(%q) = %v, want %v", tt.id, got, tt.want)
			}
		})
	}
}

// FuzzOpen checks that Open never panics and returns nothing but a plaintext
// or exactly ErrOpen. The seed corpus is the vectors.
func FuzzOpen(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(v.priv.Bytes(), v.requestID, v.env.PublicKey, v.env.IV, v.env.Tag, v.env.Ciphertext)
	}
	f.Fuzz(func(t *testing.T, privateKey []byte, requestID, publicKey, iv, tag, ciphertext string) {
		priv, err := ecdh.P256().NewPrivateKey(privateKey)
		if err != nil {
			t.Skip("not a P-256 scalar")
		}
		env := envelope.Envelope{PublicKey: publicKey, IV: iv, Tag: tag, Ciphertext: ciphertext}
		got, err := envelope.Open(priv, requestID, env)
		if err != nil && (err != envelope.ErrOpen || got != nil) {
			t.Fatalf("Open = %d bytes, %v; want a plaintext or nil, ErrOpen", len(got), err)
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	priv := newKey(b)
	id := newRequestID(b)
	plaintext := page(b, 75<<10)
	b.SetBytes(int64(len(plaintext)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.Seal(rand.Reader, priv.PublicKey(), id, plaintext); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	priv := newKey(b)
	id := newRequestID(b)
	plaintext := page(b, 75<<10)
	env := seal(b, priv.PublicKey(), id, plaintext)
	b.SetBytes(int64(len(plaintext)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.Open(priv, id, env); err != nil {
			b.Fatal(err)
		}
	}
}

func newKey(tb testing.TB) *ecdh.PrivateKey {
	tb.Helper()
	k, err := envelope.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func newRequestID(tb testing.TB) string {
	tb.Helper()
	return hex.EncodeToString(randomBytes(tb, 32))
}

func randomBytes(tb testing.TB, n int) []byte {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatal(err)
	}
	return b
}

func seal(tb testing.TB, pub *ecdh.PublicKey, id string, plaintext []byte) envelope.Envelope {
	tb.Helper()
	env, err := envelope.Seal(rand.Reader, pub, id, plaintext)
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

// page returns a page as the broker sends it, with a JPEG-looking frame of
// jpegSize bytes (SOI first, EOI last); 75 KiB of JPEG make a page of about
// 100 KB.
func page(tb testing.TB, jpegSize int) []byte {
	tb.Helper()
	frame := make([]byte, jpegSize)
	if _, err := mrand.NewChaCha8([32]byte{}).Read(frame); err != nil {
		tb.Fatal(err)
	}
	copy(frame, []byte{0xff, 0xd8, 0xff, 0xe0})
	copy(frame[len(frame)-2:], []byte{0xff, 0xd9})
	b, err := json.Marshal(map[string]string{
		"url":         "https://example.com/account",
		"title":       "Account",
		"capturedAt":  "2026-11-03T12:00:00.000Z",
		"contentType": "image/jpeg",
		"data":        base64.StdEncoding.EncodeToString(frame),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// SealJSON writes exactly what json.Marshal(Sealed{Seal(…)}) writes, and it opens.
func TestSealJSONIsTheMarshalledEnvelope(t *testing.T) {
	priv := newKey(t)
	id := newRequestID(t)
	for _, n := range []int{0, 1, 2, 3, 100, 75 << 10} {
		plaintext := randomBytes(t, n)
		b, err := envelope.SealJSON(rand.Reader, priv.PublicKey(), id, plaintext)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var sealed envelope.Sealed
		if err := dec.Decode(&sealed); err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		again, err := json.Marshal(sealed)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%d bytes: SealJSON wrote\n%.200s\njson.Marshal writes\n%.200s", n, b, again)
		}
		got, err := envelope.Open(priv, id, sealed.Envelope)
		if err != nil || !bytes.Equal(got, plaintext) {
			t.Fatalf("%d bytes: open: %v", n, err)
		}
	}
	if _, err := envelope.SealJSON(rand.Reader, priv.PublicKey(), "not an id", nil); err == nil {
		t.Fatal("SealJSON took a bad request id")
	}
}

// BenchmarkSealJSON is BenchmarkSeal with the wire's JSON, as the broker answers.
func BenchmarkSealJSON(b *testing.B) {
	priv := newKey(b)
	id := newRequestID(b)
	plaintext := page(b, 75<<10)
	b.SetBytes(int64(len(plaintext)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := envelope.SealJSON(rand.Reader, priv.PublicKey(), id, plaintext); err != nil {
			b.Fatal(err)
		}
	}
}
