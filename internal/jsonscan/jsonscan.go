// Package jsonscan reads the few JSON shapes the view's wire bodies take in one pass,
// without allocation: the fast paths of strict decoders, which fall back to
// encoding/json for anything else. It is internal: the protocol is wire's, not these
// scanners'.
package jsonscan

import (
	"bytes"
	"unicode/utf8"
)

// FlatStrings is the fast path of the strict decoders of the view's wire bodies: it
// reads b[i:] as one JSON object whose members are exactly names, each once and in any
// order, every value a string without escapes, without control characters, of valid
// UTF-8 — the shape the other end writes. It stores each value (a sub-slice of b) in
// vals, in the order of names, and returns the offset just after the object.
//
// ok is false for anything else, valid JSON included (an escape, a duplicate, a
// number), and the caller then reads b with the strict encoding/json decoder: this is
// only a faster way to the same answer, never a second rule. Every body it accepts, the
// strict decoder accepts with the same values (the differential tests prove it).
func FlatStrings(b []byte, i int, names []string, vals [][]byte) (end int, ok bool) {
	clear(vals)
	i = SkipSpace(b, i)
	if len(names) == 0 || i >= len(b) || b[i] != '{' {
		return 0, false
	}
	i++
	for n := range names {
		if n > 0 {
			if i = SkipSpace(b, i); i >= len(b) || b[i] != ',' {
				return 0, false
			}
			i++
		}
		var key, v []byte
		if key, i, ok = PlainString(b, SkipSpace(b, i)); !ok {
			return 0, false
		}
		slot := -1
		for j, name := range names {
			if string(key) == name {
				slot = j
				break
			}
		}
		if slot < 0 || slot >= len(vals) || vals[slot] != nil { //nolint:gosec // slot < len(vals), checked before it is used
			return 0, false // unknown, differently cased or repeated: the strict decoder decides
		}
		if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
			return 0, false
		}
		if v, i, ok = PlainString(b, SkipSpace(b, i+1)); !ok {
			return 0, false
		}
		vals[slot] = v //nolint:gosec // slot < len(vals), checked above
	}
	if i = SkipSpace(b, i); i >= len(b) || b[i] != '}' {
		return 0, false
	}
	return i + 1, true
}

// PlainString reads a JSON string at b[i] that needs no unescaping (no backslash, no
// control character, valid UTF-8) and returns its content and the offset after its
// closing quote; ok is false for any other string, which the strict decoder must read.
func PlainString(b []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	n := bytes.IndexByte(b[i+1:], '"')
	if n < 0 {
		return nil, 0, false
	}
	s = b[i+1 : i+1+n]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, 0, false
	}
	for _, c := range s {
		if c < 0x20 {
			return nil, 0, false
		}
	}
	if !utf8.Valid(s) {
		// encoding/json would replace the invalid bytes; let it.
		return nil, 0, false
	}
	return s, i + 2 + n, true
}

// SkipSpace skips JSON whitespace from b[i].
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// OnlySpace reports whether b[i:] is JSON whitespace alone.
func OnlySpace(b []byte, i int) bool { return SkipSpace(b, i) == len(b) }
