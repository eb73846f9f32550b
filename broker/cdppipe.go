package broker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/go-rod/rod/lib/cdp"
)

// Limits of the DevTools pipe.
const (
	// MaxCDPMessage bounds one message from Chromium. The largest the broker asks
	// for are a screenshot (tens of KB of base64) and a DOM snapshot with computed
	// styles (a few MB on a heavy page); a message past the bound ends the connection
	// rather than the broker's memory.
	MaxCDPMessage = 64 << 20 // 64 MiB
	// cdpSendTimeout bounds the write of one message to Chromium. Chromium reads its
	// pipe on a thread of its own, whatever its pages do; a write that waits this long
	// finds a Chromium that is gone or wedged, and the connection is ended.
	cdpSendTimeout = 10 * time.Second
	// cdpReadBuffer is the read buffer: a pipe's capacity, and about a screenshot.
	cdpReadBuffer = 64 << 10 // 64 KiB
	// cdpSendKept is the largest send buffer kept for the next message; commands are
	// small but for a typed text.
	cdpSendKept = 64 << 10 // 64 KiB
)

// errCDPMessageTooLarge is a message from Chromium larger than MaxCDPMessage.
var errCDPMessageTooLarge = fmt.Errorf("cdp pipe: message larger than %d bytes", MaxCDPMessage)

// cdpPipe carries the DevTools protocol over the two pipes of Chromium's
// --remote-debugging-pipe: Chromium reads commands from its file descriptor 3 and
// writes answers and events to its descriptor 4, each message JSON followed by a NUL
// byte (which JSON text never holds). No socket exists, so no other process can
// reach Chromium's DevTools, as it could a port on loopback. It is a
// cdp.WebSocketable: Send may be called from any goroutine, Read from one at a time
// (cdp.Client's reader).
type cdpPipe struct {
	r  *bufio.Reader
	rf *os.File // the read end of Chromium's output

	sendMu sync.Mutex
	w      *os.File // the write end of Chromium's input; guarded by sendMu
	out    []byte   // the message being written, with its NUL; guarded by sendMu

	closeOnce sync.Once
}

var _ cdp.WebSocketable = (*cdpPipe)(nil)

// newCDPPipe makes a connection over w (to Chromium) and r (from Chromium), which
// it owns from then on. Both must be pollable (os.Pipe's are) for the write
// deadline and for Close to end a Read.
func newCDPPipe(w, r *os.File) *cdpPipe {
	return &cdpPipe{w: w, rf: r, r: bufio.NewReaderSize(r, cdpReadBuffer)}
}

// Send writes one message. A write that fails or times out (cdpSendTimeout) leaves a
// part of a message in the pipe, so the connection is closed.
func (p *cdpPipe) Send(msg []byte) error {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	// One write of the message and its NUL: one system call, and no other message
	// between the two.
	p.out = append(append(p.out[:0], msg...), 0)
	err := p.w.SetWriteDeadline(time.Now().Add(cdpSendTimeout))
	if err == nil {
		_, err = p.w.Write(p.out)
	}
	if cap(p.out) > cdpSendKept {
		p.out = nil
	}
	if err != nil {
		_ = p.Close()
		if errors.Is(err, syscall.EPIPE) {
			// Chromium closed its input: the same news a Read brings as the end of
			// the stream, whichever of the two comes first, so it says so alike.
			return fmt.Errorf("cdp pipe: send: chromium closed its input: %w", io.EOF)
		}
		return fmt.Errorf("cdp pipe: send: %w", err)
	}
	return nil
}

// Read returns the next whole message, without its NUL. It fails at the end of the
// stream (Chromium exited, or Close), on a message larger than MaxCDPMessage, which
// also closes the connection, and on a stream that ends inside a message.
func (p *cdpPipe) Read() ([]byte, error) {
	var msg []byte
	for {
		chunk, err := p.r.ReadSlice(0)
		size := len(msg) + len(chunk)
		if err == nil {
			size-- // the NUL
		}
		if size > MaxCDPMessage {
			_ = p.Close()
			return nil, errCDPMessageTooLarge
		}
		switch {
		case err == nil:
			if msg == nil {
				// The common case, a message within the buffer: one copy out of it.
				return bytes.Clone(chunk[:len(chunk)-1]), nil
			}
			return append(msg, chunk[:len(chunk)-1]...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			msg = append(msg, chunk...)
		case errors.Is(err, io.EOF) && size > 0:
			return nil, fmt.Errorf("cdp pipe: %w inside a message", io.ErrUnexpectedEOF)
		default:
			return nil, fmt.Errorf("cdp pipe: read: %w", err)
		}
	}
}

// Close closes both pipes: Chromium reads the end of its input, and a Read under
// way returns an error. It may be called more than once.
func (p *cdpPipe) Close() error {
	var err error
	p.closeOnce.Do(func() {
		err = errors.Join(p.w.Close(), p.rf.Close())
	})
	return err
}
