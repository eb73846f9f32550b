// Package envelope seals what travels between the processes: a browser view page to
// the one API replica that asked for it ([Seal], with the seed's [Label]), a tool call
// to the replica that owns the worker's socket ([SealToolCall], [LabelToolCall]), and a
// tool result from that replica, authenticated by its static key ([SealFrom],
// [LabelFrom]). Each has its own HKDF label, so no envelope of one kind opens as
// another.
//
// Every seal generates an ephemeral P-256 key pair and agrees a secret with the
// recipient's P-256 public key: for a view page, the browser broker seals to the
// requesting replica's key of that one request; for a tool call, the caller
// (channel.CallTool: the operator CLI, the demo agent) seals to the owner replica's
// static key, which the session store publishes; for a tool result, the owner replica
// seals to the caller's one-time reply key and adds the secret of its own static key
// ([SealFrom]). The secret is the 32-byte x-coordinate of the shared point (two of
// them, for SealFrom). HKDF-SHA256 turns it into an AES-256-GCM key, with the request
// id as salt and the kind's label as info ([Label], [LabelToolCall], or [LabelFrom]
// followed by the three public keys). The request id is also the additional
// authenticated data, so an envelope opens only for the request it answers.
//
// A view page's construction and the wire encoding match Node's crypto module byte
// for byte; scripts/envelope.mjs is the Node reference, and testdata/envelope at the
// repository root holds the vectors it generates.
package envelope

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

const (
	// Label is the HKDF info string. It names the version of the construction:
	// any change to the construction must change the label.
	Label = "agentfy-browser-view-v1"

	// LabelToolCall is the HKDF info string of a tool call (SealToolCall): the same
	// construction as a view page's, under its own label.
	LabelToolCall = "agentfy-tool-call-v1"

	// LabelFrom is the HKDF info prefix of an envelope sealed with SealFrom. Its own
	// label keeps the two constructions apart: no envelope of one opens as the other.
	LabelFrom = "agentfy-sealed-from-v1"

	// MaxPlaintext is the largest plaintext, in bytes, that Seal accepts and
	// Open returns. Open rejects a longer ciphertext before decoding it.
	MaxPlaintext = 8 << 20 // 8 MiB
)

const (
	keySize       = 32 // bytes, AES-256 key
	ivSize        = 12 // bytes, GCM nonce
	tagSize       = 16 // bytes, GCM tag
	publicKeySize = 65 // bytes, uncompressed SEC1 P-256 point
	requestIDSize = 32 // bytes, 64 hex characters
)

// ErrOpen is the error Open returns for every failure. It does not say which
// check failed, so that a caller cannot become an oracle for an attacker.
var ErrOpen = errors.New("envelope: cannot open")

// Envelope is a sealed message as it travels on the wire: a view's page, a tool
// call or a tool result, each under its own label. PublicKey is the sender's
// ephemeral uncompressed P-256 point, IV and Tag are the GCM nonce and tag, all
// three in lowercase hex; Ciphertext is standard padded base64 and does not
// include the tag.
type Envelope struct {
	PublicKey  string `json:"publicKey"`
	IV         string `json:"iv"`
	Tag        string `json:"tag"`
	Ciphertext string `json:"ciphertext"`
}

// Sealed is the wire body, {"envelope":{...}}.
type Sealed struct {
	Envelope Envelope `json:"envelope"`
}

// GenerateKey generates an ephemeral P-256 key pair. As with crypto/ecdh, since
// Go 1.26 rand is ignored and a secure source of randomness is always used.
func GenerateKey(rand io.Reader) (*ecdh.PrivateKey, error) {
	return ecdh.P256().GenerateKey(rand)
}

// PublicKeyHex returns the public key of k, which must be a P-256 key, as the
// 130 lowercase hex characters of its uncompressed SEC1 encoding (04...), the
// form that Node's ecdh.getPublicKey('hex') returns.
func PublicKeyHex(k *ecdh.PrivateKey) string {
	return hex.EncodeToString(k.PublicKey().Bytes())
}

// ParsePublicKey parses a P-256 public key in the form PublicKeyHex returns.
// It rejects anything but exactly 130 lowercase hex characters, and any
// encoding other than an uncompressed point on the curve (compressed, hybrid,
// the point at infinity, off-curve points).
func ParsePublicKey(hexKey string) (*ecdh.PublicKey, error) {
	b, ok := decodeHex(hexKey, publicKeySize)
	if !ok {
		return nil, errors.New("envelope: public key is not 130 lowercase hex characters")
	}
	k, err := ecdh.P256().NewPublicKey(b)
	if err != nil {
		return nil, errors.New("envelope: public key is not an uncompressed P-256 point")
	}
	return k, nil
}

// ValidRequestID reports whether id is a request id: exactly 64 lowercase hex
// characters (256 bits). Uppercase hex, whitespace and other lengths are
// rejected.
func ValidRequestID(id string) bool {
	_, ok := decodeHex(id, requestIDSize)
	return ok
}

// Seal encrypts plaintext to recipient, a P-256 public key, for the request
// requestID. rand is the source of the 12-byte IV, usually crypto/rand.Reader.
// Seal rejects an invalid request id (see ValidRequestID), a nil or non-P-256
// recipient, and a plaintext longer than MaxPlaintext.
func Seal(rand io.Reader, recipient *ecdh.PublicKey, requestID string, plaintext []byte) (Envelope, error) {
	return seal(rand, nil, recipient, requestID, plaintext, Label)
}

// SealToolCall seals a tool call like Seal, under LabelToolCall: it opens only with
// OpenToolCall, never as a view page.
func SealToolCall(rand io.Reader, recipient *ecdh.PublicKey, requestID string, plaintext []byte) (Envelope, error) {
	return seal(rand, nil, recipient, requestID, plaintext, LabelToolCall)
}

// SealFrom seals like Seal and also proves who sealed: the key derives from the ECDH
// secret of the sender's ephemeral key and recipient and from that of sender's static
// key and recipient (HPKE's authenticated mode), with all three public keys in the
// HKDF info. Only the holder of sender's private key (or of recipient's) can make an
// envelope that OpenFrom accepts for sender. The tool results of the owner replica are
// sealed this way, so a result from any other party on the bus is refused.
func SealFrom(rand io.Reader, sender *ecdh.PrivateKey, recipient *ecdh.PublicKey, requestID string, plaintext []byte) (Envelope, error) {
	if sender == nil || sender.Curve() != ecdh.P256() {
		return Envelope{}, errors.New("envelope: sender is not a P-256 private key")
	}
	return seal(rand, sender, recipient, requestID, plaintext, LabelFrom)
}

func seal(rand io.Reader, sender *ecdh.PrivateKey, recipient *ecdh.PublicKey, requestID string, plaintext []byte, label string) (Envelope, error) {
	pub, iv, out, err := sealParts(rand, sender, recipient, requestID, plaintext, label)
	if err != nil {
		return Envelope{}, err
	}
	ciphertext, tag := out[:len(plaintext)], out[len(plaintext):]
	return Envelope{
		PublicKey:  hex.EncodeToString(pub),
		IV:         hex.EncodeToString(iv),
		Tag:        hex.EncodeToString(tag),
		Ciphertext: base64.StdEncoding.EncodeToString(ciphertext),
	}, nil
}

// SealJSON is Seal written as the wire carries it: json.Marshal(Sealed{env}).
func SealJSON(rand io.Reader, recipient *ecdh.PublicKey, requestID string, plaintext []byte) ([]byte, error) {
	env, err := Seal(rand, recipient, requestID, plaintext)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Sealed{Envelope: env})
}

// sealParts seals plaintext and returns the ephemeral public key, the nonce, and the
// ciphertext with the GCM tag appended.
func sealParts(rand io.Reader, sender *ecdh.PrivateKey, recipient *ecdh.PublicKey, requestID string, plaintext []byte, label string) (pub, iv, out []byte, err error) {
	if !ValidRequestID(requestID) {
		return nil, nil, nil, errors.New("envelope: request id is not 64 lowercase hex characters")
	}
	if recipient == nil || recipient.Curve() != ecdh.P256() {
		return nil, nil, nil, errors.New("envelope: recipient is not a P-256 public key")
	}
	if len(plaintext) > MaxPlaintext {
		return nil, nil, nil, fmt.Errorf("envelope: plaintext is %d bytes, more than %d", len(plaintext), MaxPlaintext)
	}
	if rand == nil {
		return nil, nil, nil, errors.New("envelope: nil random source")
	}

	ephemeral, err := GenerateKey(rand)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("envelope: generate key: %w", err)
	}
	secret, err := ephemeral.ECDH(recipient)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("envelope: key agreement: %w", err)
	}
	info := label
	if sender != nil {
		static, err := sender.ECDH(recipient)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("envelope: key agreement: %w", err)
		}
		secret = append(secret, static...)
		info = fromInfo(ephemeral.PublicKey(), recipient, sender.PublicKey())
	}
	aead, err := newAEAD(secret, requestID, info)
	if err != nil {
		return nil, nil, nil, err
	}
	iv = make([]byte, ivSize)
	if _, err := io.ReadFull(rand, iv); err != nil {
		return nil, nil, nil, fmt.Errorf("envelope: read iv: %w", err)
	}
	// GCM appends the tag to the ciphertext; the wire carries them apart.
	return ephemeral.PublicKey().Bytes(), iv, aead.Seal(nil, iv, plaintext, []byte(requestID)), nil
}

// Open decrypts env with priv, the recipient's P-256 private key, for the
// request requestID. Every failure returns exactly ErrOpen: a nil or non-P-256
// key, an invalid request id, a field that is not in its canonical encoding
// (lowercase hex, standard padded base64 without line breaks) or not of its
// exact size (65-byte uncompressed point, 12-byte IV, 16-byte tag), an
// off-curve point, a ciphertext longer than MaxPlaintext, or a failed
// authentication, which covers a wrong key, request id, IV, tag or ciphertext.
func Open(priv *ecdh.PrivateKey, requestID string, env Envelope) ([]byte, error) {
	return open(priv, nil, requestID, env, Label, nil)
}

// OpenTo is Open decrypting in dst's storage when it holds the decoded ciphertext and
// its tag, for a caller that holds the plaintext only for a moment and lends a buffer
// it reuses (wire.Scratch); otherwise in a new one. The plaintext returned aliases dst
// when it fitted. It fails like Open, and then dst may hold some of the ciphertext.
func OpenTo(dst []byte, priv *ecdh.PrivateKey, requestID string, env Envelope) ([]byte, error) {
	return open(priv, nil, requestID, env, Label, dst)
}

// OpenToolCall opens an envelope made by SealToolCall; it fails with ErrOpen like Open,
// and for a view page.
func OpenToolCall(priv *ecdh.PrivateKey, requestID string, env Envelope) ([]byte, error) {
	return open(priv, nil, requestID, env, LabelToolCall, nil)
}

// OpenFrom opens an envelope made by SealFrom with sender's key. It fails with ErrOpen
// like Open, and for an envelope that sender did not seal (a plain Seal included).
func OpenFrom(priv *ecdh.PrivateKey, sender *ecdh.PublicKey, requestID string, env Envelope) ([]byte, error) {
	if sender == nil || sender.Curve() != ecdh.P256() {
		return nil, ErrOpen
	}
	return open(priv, sender, requestID, env, LabelFrom, nil)
}

func open(priv *ecdh.PrivateKey, sender *ecdh.PublicKey, requestID string, env Envelope, label string, dst []byte) ([]byte, error) {
	if priv == nil || priv.Curve() != ecdh.P256() || !ValidRequestID(requestID) {
		return nil, ErrOpen
	}
	// Check the size before decoding anything, so that an oversized envelope
	// costs no allocation.
	if len(env.Ciphertext) > base64.StdEncoding.EncodedLen(MaxPlaintext) {
		return nil, ErrOpen
	}
	ephemeral, err := ParsePublicKey(env.PublicKey)
	if err != nil {
		return nil, ErrOpen
	}
	iv, ok := decodeHex(env.IV, ivSize)
	if !ok {
		return nil, ErrOpen
	}
	tag, ok := decodeHex(env.Tag, tagSize)
	if !ok {
		return nil, ErrOpen
	}
	// The decoder skips line breaks, and a decoded length alone would not
	// catch them, so refuse them explicitly to keep one encoding per envelope.
	if strings.ContainsAny(env.Ciphertext, "\r\n") {
		return nil, ErrOpen
	}
	enc := base64.StdEncoding.Strict()
	var buf []byte
	if n := enc.DecodedLen(len(env.Ciphertext)); cap(dst) >= n+tagSize {
		buf = dst[:n]
	} else {
		buf = make([]byte, n, n+tagSize)
	}
	n, err := enc.Decode(buf, []byte(env.Ciphertext))
	if err != nil || n > MaxPlaintext {
		return nil, ErrOpen
	}
	sealed := append(buf[:n], tag...)

	secret, err := priv.ECDH(ephemeral)
	if err != nil {
		return nil, ErrOpen
	}
	info := label
	if sender != nil {
		static, err := priv.ECDH(sender)
		if err != nil {
			return nil, ErrOpen
		}
		secret = append(secret, static...)
		info = fromInfo(ephemeral, priv.PublicKey(), sender)
	}
	aead, err := newAEAD(secret, requestID, info)
	if err != nil {
		return nil, ErrOpen
	}
	plaintext, err := aead.Open(sealed[:0], iv, sealed, []byte(requestID))
	if err != nil {
		return nil, ErrOpen
	}
	return plaintext, nil
}

// fromInfo is the HKDF info of SealFrom: its label, then the ephemeral, recipient and
// sender public keys (65 bytes each), so the key is bound to all three.
func fromInfo(ephemeral, recipient, sender *ecdh.PublicKey) string {
	return LabelFrom + string(ephemeral.Bytes()) + string(recipient.Bytes()) + string(sender.Bytes())
}

// newAEAD derives the AES-256-GCM key for requestID from the ECDH secret.
func newAEAD(secret []byte, requestID, info string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, []byte(requestID), info, keySize)
	if err != nil {
		return nil, fmt.Errorf("envelope: derive key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("envelope: cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("envelope: gcm: %w", err)
	}
	return aead, nil
}

// decodeHex decodes s if it is exactly n bytes in lowercase hex, the only form
// Node's Buffer.toString('hex') emits.
func decodeHex(s string, n int) ([]byte, bool) {
	if len(s) != 2*n {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, false
		}
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}
