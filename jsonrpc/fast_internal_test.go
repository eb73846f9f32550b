package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentfy/agentfy/internal/jsonscan"
)

var responseSeeds = []string{
	`{"jsonrpc":"2.0","id":7,"result":{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"}}}`,
	` { "result" : [1, -2.5e+3, true, false, null, "a\u00e9\n", {}] , "id" : 0 , "jsonrpc" : "2.0" } `,
	`{"jsonrpc":"2.0","id":18446744073709551615,"result":"x"}`,
	`{"jsonrpc":"2.0","id":18446744073709551616,"result":"x"}`,
	`{"jsonrpc":"2.0","id":01,"result":"x"}`,
	`{"jsonrpc":"2.0","id":1.0,"result":"x"}`,
	`{"jsonrpc":"2.0","id":-1,"result":"x"}`,
	`{"jsonrpc":"2.0","id":1,"result":null}`,
	`{"jsonrpc":"2.0","id":1,"result":"x"}}`,
	`{"jsonrpc":"2.0","id":1,"result":"x"} {}`,
	`{"jsonrpc":"2.0","id":1,"result":"x","result":"y"}`,
	`{"jsonrpc":"2.0","ID":1,"result":"x"}`,
	`{"jsonrpc":"1.0","id":1,"result":"x"}`,
	`{"jsonrpc":"2.0","id":1,"result":"x","error":{"code":1,"message":""}}`,
	`{"jsonrpc":"2.0","id":1,"result":01}`,
	`{"jsonrpc":"2.0","id":1,"result":"\x"}`,
	`{"jsonrpc":"2.0","id":1,"result":tru}`,
	`{"jsonrpc":"2.0","id":1,"result":[1,]}`,
	`{"jsonrpc":"2.0","id":1,"result":{"a":1,}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\t\"}",
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"\xff\"}",
	`{"jsonrpc":"2.0","id":1,"method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"x","data":{"reason":"capture"}}}`,
}

// TestFastPathAgreesWithStrict: what the fast path accepts, the strict decoder accepts
// as the same message; a worker's answer takes the fast path.
func TestFastPathAgreesWithStrict(t *testing.T) {
	for _, s := range responseSeeds {
		checkFastPath(t, []byte(s))
	}
	for _, s := range responseSeeds[:3] {
		if _, ok := parseResponseFast([]byte(s)); !ok {
			t.Errorf("the fast path refused %q", s)
		}
	}
	if _, err := Parse([]byte(responseSeeds[8])); err == nil {
		t.Error("a trailing } was accepted")
	}
	deep := `{"jsonrpc":"2.0","id":1,"result":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`
	if m, err := Parse([]byte(deep)); err != nil || len(m.Result) != 80 {
		t.Errorf("a deep result: %v", err)
	}
}

func FuzzFastPath(f *testing.F) {
	for _, s := range responseSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkFastPath)
}

func checkFastPath(t *testing.T, b []byte) {
	// validValue accepts exactly what encoding/json accepts (within its depth).
	if end, ok := validValue(b, jsonscan.SkipSpace(b, 0), 0); ok && jsonscan.SkipSpace(b, end) == len(b) && !json.Valid(b) {
		t.Fatalf("validValue accepted %q, json.Valid refuses it", b)
	}
	if json.Valid(b) && bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) < maxDepth {
		if end, ok := validValue(b, jsonscan.SkipSpace(b, 0), 0); !ok || jsonscan.SkipSpace(b, end) != len(b) {
			t.Fatalf("validValue refused %q, json.Valid accepts it", b)
		}
	}
	fast, ok := parseResponseFast(b)
	if !ok {
		return
	}
	strict, err := parseStrict(b)
	if err != nil || strict.JSONRPC != fast.JSONRPC || *strict.ID != *fast.ID || !bytes.Equal(strict.Result, fast.Result) ||
		strict.Error != nil || strict.Method != "" || strict.Params != nil {
		t.Fatalf("%q: fast %+v, strict %+v (%v)", b, fast, strict, err)
	}
}

// BenchmarkParseViewResponse prices the owner replica's read of a worker's view answer
// (a 48 KB sealed envelope as the result): the one-pass fast path Parse takes and the
// strict encoding/json path it falls back to, in the same run.
func BenchmarkParseViewResponse(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"result":{"envelope":{"publicKey":"04` + strings.Repeat("ab", 64) +
		`","iv":"` + strings.Repeat("0", 24) + `","tag":"` + strings.Repeat("1", 32) + `","ciphertext":"` + strings.Repeat("QUJD", 12400) + `"}}}`)
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("strict", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseStrict(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
}
