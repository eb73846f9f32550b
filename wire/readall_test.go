package wire

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// ReadAll returns what io.ReadAll returns, for short and long messages, through one-byte
// reads, and after its pooled buffer served a larger message; a read error is returned.
func TestReadAll(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 511, 64 << 10, 64<<10 + 1, 300 << 10, 5, 2 << 20, 7} {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(rng.Uint32())
		}
		for name, r := range map[string]io.Reader{"whole": bytes.NewReader(msg), "one byte": iotest.OneByteReader(bytes.NewReader(msg)), "half": iotest.HalfReader(bytes.NewReader(msg))} {
			got, err := ReadAll(r)
			if err != nil || !bytes.Equal(got, msg) || (n > 0 && cap(got) != n) {
				t.Fatalf("%d bytes, %s: %d bytes (cap %d), %v", n, name, len(got), cap(got), err)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := ReadAll(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
	// The copy is the caller's: the next read does not write into it.
	first, _ := ReadAll(bytes.NewReader([]byte("first message")))
	_, _ = ReadAll(bytes.NewReader([]byte("second")))
	if string(first) != "first message" {
		t.Fatalf("first message became %q", first)
	}
}

func BenchmarkReadAll(b *testing.B) {
	msg := bytes.Repeat([]byte("A"), 48<<10)
	b.Run("io.ReadAll", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := io.ReadAll(bytes.NewReader(msg)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wire.ReadAll", func(b *testing.B) {
		b.SetBytes(int64(len(msg)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ReadAll(bytes.NewReader(msg)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// ReadScratch reads what ReadAll reads into a lent buffer, and Release zeroes it before
// the next user can have it: it may have held a frame's plaintext.
func TestReadScratch(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 5, 64 << 10, 300 << 10} {
		msg := make([]byte, n)
		for i := range msg {
			msg[i] = byte(rng.Uint32()) | 1
		}
		bp, err := ReadScratch(iotest.HalfReader(bytes.NewReader(msg)))
		if err != nil || !bytes.Equal(*bp, msg) {
			t.Fatalf("%d bytes: read %d, %v", n, len(*bp), err)
		}
		held := (*bp)[:cap(*bp)]
		Release(bp)
		if i := bytes.IndexFunc(held, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Fatalf("%d bytes: byte %d of the buffer given back is not zero", n, i)
		}
	}
	boom := errors.New("boom")
	if _, err := ReadScratch(iotest.ErrReader(boom)); !errors.Is(err, boom) {
		t.Fatalf("read error: %v", err)
	}
}
