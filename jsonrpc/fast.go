package jsonrpc

import (
	"bytes"
	"strconv"

	"github.com/agentfy/agentfy/internal/jsonscan"
)

// parseResponseFast reads a success response the way a worker writes one —
// {"jsonrpc":"2.0","id":N,"result":…}, members in any order, each once — in one pass
// over the result, which it delimits and checks (validValue) without decoding: the
// owner replica passes a view's result on as bytes, and a strict decode of the 48 KB
// envelope cost two scans and a copy. ok is false for anything else, valid JSON-RPC
// included, and Parse then decodes strictly: this is a faster way to the same answer,
// never a second rule (the differential tests prove it).
func parseResponseFast(b []byte) (m *Message, ok bool) {
	i := jsonscan.SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil, false
	}
	i++
	var version, id, result []byte
	for n := range 3 {
		if n > 0 {
			if i = jsonscan.SkipSpace(b, i); i >= len(b) || b[i] != ',' {
				return nil, false
			}
			i++
		}
		i = jsonscan.SkipSpace(b, i)
		key, end, ok := jsonscan.PlainString(b, i)
		if !ok {
			return nil, false
		}
		if i = jsonscan.SkipSpace(b, end); i >= len(b) || b[i] != ':' {
			return nil, false
		}
		i = jsonscan.SkipSpace(b, i+1)
		switch string(key) {
		case "jsonrpc":
			if version != nil {
				return nil, false
			}
			if version, i, ok = jsonscan.PlainString(b, i); !ok {
				return nil, false
			}
		case "id":
			if id != nil {
				return nil, false
			}
			j := i
			for j < len(b) && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			if j == i || (b[i] == '0' && j-i > 1) {
				return nil, false
			}
			id, i = b[i:j], j
		case "result":
			if result != nil {
				return nil, false
			}
			j, ok := validValue(b, i, 0)
			if !ok {
				return nil, false
			}
			result, i = b[i:j], j
		default:
			return nil, false
		}
	}
	if i = jsonscan.SkipSpace(b, i); i >= len(b) || b[i] != '}' || jsonscan.SkipSpace(b, i+1) != len(b) {
		return nil, false
	}
	if string(version) != Version || string(result) == "null" {
		return nil, false // the strict decoder decides: an error, or a null result
	}
	n, err := strconv.ParseUint(string(id), 10, 64)
	if err != nil {
		return nil, false
	}
	return &Message{JSONRPC: Version, ID: &n, Result: result}, true
}

// maxDepth bounds the nesting validValue follows; deeper values go to the strict
// decoder.
const maxDepth = 32

// validValue checks the JSON value at b[i] — strings (escapes included), numbers,
// literals, arrays and objects — and returns the offset after it. It accepts what
// encoding/json accepts as a value (any byte from 0x20 in a string), nothing more.
func validValue(b []byte, i, depth int) (int, bool) {
	if depth > maxDepth || i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		return validString(b, i)
	case '{', '[':
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = jsonscan.SkipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i, ok = validString(b, i); !ok {
					return 0, false
				}
				if i = jsonscan.SkipSpace(b, i); i >= len(b) || b[i] != ':' {
					return 0, false
				}
				i = jsonscan.SkipSpace(b, i+1)
			}
			if i, ok = validValue(b, i, depth+1); !ok {
				return 0, false
			}
			if i = jsonscan.SkipSpace(b, i); i >= len(b) {
				return 0, false
			}
			switch b[i] {
			case ',':
				i = jsonscan.SkipSpace(b, i+1)
			case end:
				return i + 1, true
			default:
				return 0, false
			}
		}
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		return validNumber(b, i)
	}
}

// validString checks the string at b[i] (which must start with a quote).
func validString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	i++
	for {
		n := bytes.IndexAny(b[i:], "\"\\")
		if n < 0 {
			return 0, false
		}
		for _, c := range b[i : i+n] {
			if c < 0x20 {
				return 0, false
			}
		}
		i += n
		if b[i] == '"' {
			return i + 1, true
		}
		// An escape: \" \\ \/ \b \f \n \r \t or \uXXXX.
		if i+1 >= len(b) {
			return 0, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if i+6 > len(b) {
				return 0, false
			}
			for _, h := range b[i+2 : i+6] {
				if (h < '0' || h > '9') && (h < 'a' || h > 'f') && (h < 'A' || h > 'F') {
					return 0, false
				}
			}
			i += 6
		default:
			return 0, false
		}
	}
}

// validNumber checks a JSON number at b[i]: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func literal(b []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return 0, false
	}
	return i + len(lit), true
}
