package view

import "testing"

var sealedSeeds = []string{
	`{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"}}`,
	" {\n \"envelope\" : { \"ciphertext\":\"QUJD\", \"tag\":\"11\", \"iv\":\"00\", \"publicKey\":\"04ab\" } }\n",
	`{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QU\/D"}}`,
	`{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"}}}`,
	`{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"}} {}`,
	`{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD","x":""}}`,
	`{"envelope":{"publicKey":"04ab","iv":"00","tag":"11"}}`,
	`{"Envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"}}`,
	`{"envelope":{"publicKey":"04ab","iv":"00","tag":"11","ciphertext":"QUJD"},"envelope":{}}`,
	`{"envelope":null}`,
	`[]`,
	``,
}

// TestSealedFastPathAgreesWithStrict: what the fast path accepts, the strict decoder
// accepts with the same values; the broker's shape takes the fast path.
func TestSealedFastPathAgreesWithStrict(t *testing.T) {
	for _, s := range sealedSeeds {
		checkSealedFastPath(t, []byte(s))
	}
	for _, s := range sealedSeeds[:2] {
		if _, ok := decodeSealedFast([]byte(s)); !ok {
			t.Errorf("the fast path refused the broker's shape %q", s)
		}
	}
	if _, err := decodeSealedStrict([]byte(sealedSeeds[3])); err == nil {
		t.Error("a trailing } was accepted")
	}
}

func FuzzSealedFastPath(f *testing.F) {
	for _, s := range sealedSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkSealedFastPath)
}

func checkSealedFastPath(t *testing.T, b []byte) {
	fast, ok := decodeSealedFast(b)
	if !ok {
		return
	}
	strict, err := decodeSealedStrict(b)
	if err != nil || strict != fast {
		t.Fatalf("%q: fast %+v, strict %+v (%v)", b, fast, strict, err)
	}
}
