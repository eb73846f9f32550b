package wire

import (
	"errors"
	"io"
	"sync"
)

// scratch holds the buffers ReadAll reads into and Scratch lends; one that grew past
// maxScratch is left to the collector.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxScratch = 1 << 20

// Scratch lends a buffer for bytes that live only while their user holds them (a
// message until it is parsed, a frame's plaintext until it is checked): empty, of some
// capacity. Whoever grows it stores the grown slice back in *bp, and gives it back with
// Release once nothing refers to its bytes.
func Scratch() *[]byte {
	bp := scratch.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

// Release gives back a buffer Scratch lent, its bytes zeroed first: it may have held a
// frame's plaintext, which must not outlive its view in a buffer that a later one
// reuses. A buffer that grew past 1 MiB is left to the collector.
func Release(bp *[]byte) {
	b := *bp
	if cap(b) > maxScratch {
		return
	}
	clear(b[:cap(b)])
	*bp = b[:0]
	scratch.Put(bp)
}

// ReadScratch reads r to its end into a buffer Scratch lends, which the caller gives
// back with Release once it is done with the bytes: the view path's messages are read
// and parsed, and their bytes copied out by the parser, so this saves ReadAll's copy.
// The caller bounds r (io.LimitReader, a WebSocket read limit).
func ReadScratch(r io.Reader) (*[]byte, error) {
	bp := Scratch()
	b := *bp
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			*bp = b
			return bp, nil
		}
		if err != nil {
			*bp = b
			Release(bp)
			return nil, err
		}
	}
}

// ReadAll is io.ReadAll for the messages of the view path (a sealed frame is some tens
// of kilobytes): it reads into a pooled buffer and returns a copy of exactly the bytes
// read, where io.ReadAll, growing from 512 bytes, allocates about three times the
// message. The caller bounds r (io.LimitReader, a WebSocket read limit).
func ReadAll(r io.Reader) ([]byte, error) {
	bp, err := ReadScratch(r)
	if err != nil {
		return nil, err
	}
	defer Release(bp)
	out := make([]byte, len(*bp))
	copy(out, *bp)
	return out, nil
}
