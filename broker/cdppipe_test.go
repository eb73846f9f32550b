package broker

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// testPipe is a cdpPipe whose other ends the test holds: chromium reads what the
// pipe sends, and the test writes to feed what the pipe reads.
func testPipe(tb testing.TB) (p *cdpPipe, chromium io.Reader, feed *os.File) {
	tb.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	p = newCDPPipe(inW, outR)
	tb.Cleanup(func() { _, _, _ = p.Close(), inR.Close(), outW.Close() })
	return p, inR, outW
}

// TestCDPPipeRead feeds the pipe what Chromium may write: messages come out whole
// and in order however the bytes are split, up to MaxCDPMessage; past it, or on a
// stream that ends inside a message, Read fails.
func TestCDPPipeRead(t *testing.T) {
	big := strings.Repeat("x", 3*cdpReadBuffer+17) // across several buffers
	tests := []struct {
		name    string
		writes  []string
		want    []string
		wantErr error // after the messages of want
	}{
		{name: "one message", writes: []string{`{"id":1}` + "\x00"}, want: []string{`{"id":1}`}, wantErr: io.EOF},
		{name: "two in one write", writes: []string{`{"id":1}` + "\x00" + `{"id":2}` + "\x00"}, want: []string{`{"id":1}`, `{"id":2}`}, wantErr: io.EOF},
		{name: "split byte by byte", writes: strings.Split(`{"id":3}`+"\x00", ""), want: []string{`{"id":3}`}, wantErr: io.EOF},
		{name: "larger than the buffer", writes: []string{big[:100], big[100:] + "\x00" + `{}` + "\x00"}, want: []string{big, `{}`}, wantErr: io.EOF},
		{name: "empty message", writes: []string{"\x00"}, want: []string{""}, wantErr: io.EOF},
		{name: "ends inside a message", writes: []string{`{"id":1}` + "\x00" + `{"id"`}, want: []string{`{"id":1}`}, wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, feed := testPipe(t)
			go func() {
				for _, w := range tt.writes {
					_, _ = feed.WriteString(w)
				}
				_ = feed.Close()
			}()
			for _, want := range tt.want {
				got, err := p.Read()
				if err != nil || string(got) != want {
					t.Fatalf("Read = %.40q, %v; want %.40q", got, err, want)
				}
			}
			if _, err := p.Read(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("Read at the end: %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestCDPPipeReadBound checks that a message of MaxCDPMessage bytes is read and one
// byte more is refused, and that the refusal closes the connection.
func TestCDPPipeReadBound(t *testing.T) {
	for _, tt := range []struct {
		name    string
		size    int
		wantErr error
	}{
		{name: "at the bound", size: MaxCDPMessage},
		{name: "past the bound", size: MaxCDPMessage + 1, wantErr: errCDPMessageTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, chromium, feed := testPipe(t)
			go func() {
				_, _ = feed.Write(append(bytes.Repeat([]byte{'a'}, tt.size), 0))
				_ = feed.Close()
			}()
			got, err := p.Read()
			if !errors.Is(err, tt.wantErr) || (err == nil && len(got) != tt.size) {
				t.Fatalf("Read = %d bytes, %v; want %d bytes, %v", len(got), err, tt.size, tt.wantErr)
			}
			if tt.wantErr == nil {
				return
			}
			// Closed: Chromium reads the end of its input.
			if n, err := chromium.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
				t.Fatalf("Chromium's input after a refused message: %d, %v; want EOF", n, err)
			}
		})
	}
}

// TestCDPPipeSend checks that each message reaches Chromium whole, followed by a NUL,
// from many goroutines at once, and that Send fails once the pipe is closed.
func TestCDPPipeSend(t *testing.T) {
	p, chromium, _ := testPipe(t)
	const senders, each = 8, 50
	msg := []byte(`{"id":1,"method":"Target.getTargets","params":{}}`)
	errs := make(chan error, senders)
	for range senders {
		go func() {
			var err error
			for range each {
				if err = p.Send(msg); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	want := bytes.Repeat(append(bytes.Clone(msg), 0), senders*each)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(chromium, got); err != nil {
		t.Fatal(err)
	}
	for range senders {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("messages reached Chromium interleaved or without their NUL")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send(msg); err == nil {
		t.Fatal("Send on a closed pipe succeeded")
	}
}

// TestCDPPipeSendToClosedInput checks that a Send to a Chromium that closed its
// input fails as a Read of its closed output does, with io.EOF, and closes the
// connection. CI saw a launch fail either way, depending on which came first.
func TestCDPPipeSendToClosedInput(t *testing.T) {
	p, chromium, _ := testPipe(t)
	if err := chromium.(io.Closer).Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Send([]byte(`{"id":1}`)); !errors.Is(err, io.EOF) {
		t.Fatalf("Send = %v, want io.EOF", err)
	}
	if err := p.Send([]byte(`{"id":2}`)); err == nil {
		t.Fatal("Send after the failed one succeeded: the connection stayed open")
	}
}

// TestCDPPipeCloseEndsRead checks that Close ends a Read that waits for Chromium.
func TestCDPPipeCloseEndsRead(t *testing.T) {
	p, _, feed := testPipe(t)
	first := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		if _, err := p.Read(); err != nil {
			done <- err
			return
		}
		close(first)
		_, err := p.Read() // nothing more comes
		done <- err
	}()
	if _, err := feed.WriteString("{}\x00"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first:
	case err := <-done:
		t.Fatalf("first Read: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the Read")
	}
}
